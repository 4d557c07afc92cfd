package storage

import (
	"context"
	"errors"
	"fmt"
)

// AdminStore is a Store whose records an operator can read, delete and list
// by id: what tools such as the idemkit command need, never the engine. An
// optional capability, discovered with a type assertion as StepStore is;
// dynamostore, redisstore, pgstore and idempotent.NewMemoryStore implement
// it. Its methods are never on an invocation's path. What is one store's own
// (a page size, DynamoDB's read units) is on that store's types.
type AdminStore interface {
	Store

	// Get reads the record id as stored. There being none is an error
	// wrapping ErrNotFound; a stored record that does not decode is a
	// *CorruptRecordError. An expired record the store has not yet
	// removed is returned as it is (see Record.Expired).
	Get(ctx context.Context, id string) (Record, error)

	// Delete deletes the record rec.ID in one atomic operation, on
	// condition that it is still exactly as rec describes it (as Get or
	// Scan returned it): status, expiry, lease and lease end, fingerprint,
	// version, steps and suspension. A record that changed meanwhile (a
	// completion, a takeover, a new claim, a step, a suspension) is left
	// alone and the error wraps ErrChanged; one that is gone, ErrChanged
	// and ErrNotFound. Deleting a live INPROGRESS record lets a duplicate
	// run the handler while its owner may still be running: the caller
	// decides that, not Delete.
	Delete(ctx context.Context, rec Record) error

	// Scan passes the stored records that opts selects to fn, in an order
	// of the store's, until all are passed, fn returns false (Scan then
	// returns nil and calls fn no more) or ctx ends. A record that does
	// not decode is passed as a zero Record and a *CorruptRecordError; fn
	// decides whether to go on. Any other error ends the scan and is
	// returned. A store may pass a record more than once (Redis's SCAN
	// may); fn is called from one goroutine at a time.
	Scan(ctx context.Context, opts ScanOptions, fn func(Record, error) bool) error
}

// ScanOptions selects and observes the records of an AdminStore.Scan.
type ScanOptions struct {
	// Status, when set, keeps only records of that status. Whether a
	// corrupt record is passed is the store's: one that filters on its
	// server (DynamoDB, PostgreSQL) passes it only if its stored status
	// matches, the others pass it whatever its status.
	Status Status

	// IDPrefix, when set, keeps only records (corrupt ones included) whose
	// id starts with it, for example "payments#": one function's. A store
	// narrows its reads by it where it can (a key range, a match pattern).
	IDPrefix string

	// Progress, when set, is called after each page the store reads.
	Progress func(ScanProgress)
}

// ScanProgress is how far a Scan has come.
type ScanProgress struct {
	// Pages is the number of requests (pages, SCAN calls, queries) made.
	Pages int
	// Scanned is the number of stored records read, before Status is
	// applied; where the server applies it (PostgreSQL), the records it
	// returned.
	Scanned int64
	// Matched is the number of records that passed the filters so far:
	// those passed to the callback, and those of the last page not yet
	// passed.
	Matched int64
}

// Errors of an AdminStore. Match them with errors.Is; a store wraps them
// with its cause.
var (
	// ErrNotFound: no record holds the id: it never existed, or was
	// released, forgotten, or removed after it expired (TTL, a sweep).
	ErrNotFound = errors.New("idempotent: no record with this id")

	// ErrChanged: Delete found the record changed since it was read, or
	// gone; nothing was deleted. Read it again before deciding.
	ErrChanged = errors.New("idempotent: record changed since it was read")
)

// CorruptRecordError reports a stored record that an AdminStore cannot
// decode: damaged, of a foreign layout, or another tool's (Powertools').
// It matches ErrCorruptRecord with errors.Is. Nothing in this module ever
// rewrites such a record.
type CorruptRecordError struct {
	// ID is the record id it is stored under ("" when even that cannot be
	// read).
	ID string
	// Fields is the record as stored, for showing: each field's or
	// attribute's name with its value as text, in the store's notation
	// (DynamoDB's "TYPE value", a Redis hash field's quoted value). Nil
	// when the store has nothing to show.
	Fields map[string]string
	// Err says what is wrong.
	Err error
}

// Error names the record and what is wrong with it.
func (e *CorruptRecordError) Error() string {
	if e.ID == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("record %s: %v", e.ID, e.Err)
}

// Unwrap returns Err.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorruptRecord, whatever Err wraps.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorruptRecord }
