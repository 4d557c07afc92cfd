package storage

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent/internal/envelope"
)

// RecordVersion is the record format this package writes. A stored record of any
// other version is foreign: it is reported as [ErrCorruptRecord], never replayed.
const RecordVersion = 1

// Status is the stored state of a record. EXPIRED is never stored: a record is
// expired when its ExpiresAt has passed.
type Status string

// The two stored states.
const (
	// StatusInProgress marks a record whose owner holds a lease and is running the handler.
	StatusInProgress Status = "INPROGRESS"
	// StatusCompleted marks a record that holds the handler's response.
	StatusCompleted Status = "COMPLETED"
)

// Record is what a Store holds for one idempotency key. Stores persist every
// field as given and return it unchanged; they interpret only ID, Status,
// ExpiresAt, LeaseExpiresAt and Lease, exactly as documented on [Store].
type Record struct {
	// ID is the storage key: "<prefix>#<sha256 hex of the key material>",
	// valid UTF-8 without NUL (see Text in the package doc).
	ID string
	// Status is INPROGRESS or COMPLETED.
	Status Status
	// ExpiresAt is when the record stops counting (whole seconds; the TTL).
	ExpiresAt time.Time
	// LeaseExpiresAt is when an INPROGRESS record may be taken over (millisecond
	// precision). It is zero on completed records.
	LeaseExpiresAt time.Time
	// Lease is the random token of the invocation that owns the record.
	Lease string
	// Fingerprint is the hash of the validated payload, or empty.
	Fingerprint string
	// Data is the encoded response of a completed record (Response decodes
	// it). It is opaque to stores.
	Data []byte
	// Version is the record format version (RecordVersion when written by this package).
	Version int
	// Steps are the steps the record's owners finished while it was
	// INPROGRESS, in the order they finished (see idempotent.Step). A claim
	// that takes the record over for the same Fingerprint keeps them; every
	// other write that replaces the record, and Complete, drops them.
	Steps []Step
	// Suspended reports that the record's owner gave it up after its work
	// failed, keeping its Steps for the next claim of the same payload
	// (Store.Suspend). Its lease end is then in the past. A claim that
	// replaces a suspended record resumes it ([ClaimResult.Resumed]); it is
	// not a takeover of a crashed or overrunning owner.
	Suspended bool
	// Trace is the trace context of the call that completed the record,
	// when that call was traced (idempotent.WithCallHook): a W3C
	// traceparent by default, opaque to stores, printable ASCII of at most
	// [MaxTraceBytes]. A replay links to it. It is optional: empty in
	// records of untraced calls, in records written before the field
	// existed, and in foreign ones. Complete writes it as given, replacing
	// the stored one (empty included); a claimed record holds none, whatever
	// the claim's Trace (it names the call that completes the record).
	Trace string
}

// MaxTraceBytes is the longest Record.Trace the engine writes (a W3C
// traceparent is 55 bytes). Every store must hold one this long.
const MaxTraceBytes = 256

// Step is one finished step of a record's owner: its name, unique within
// the record, and its encoded result, opaque to stores.
type Step struct {
	// Name is the step's name, as the handler gave it to idempotent.Step:
	// valid UTF-8 without NUL (see Text in the package doc).
	Name string
	// Data is the step's encoded result.
	Data []byte
}

// Resumable reports whether a claim of claim that replaces r keeps r's Steps:
// r is an INPROGRESS record that has not expired at now and carries the same
// Fingerprint as claim (both empty counts as the same). Steps are bound to
// the payload they were recorded for, and die with the record.
func (r *Record) Resumable(claim *Record, now time.Time) bool {
	return r.Status == StatusInProgress && !r.Expired(now) && r.Fingerprint == claim.Fingerprint
}

// Replaceable reports whether a claim of claim at now may replace the stored
// record r. This is the liveness rule every Store applies atomically in
// Claim: r may be replaced when it has expired (ExpiresAt.Unix() <
// now.Unix()), or when it is INPROGRESS, its lease has lapsed
// (LeaseExpiresAt.UnixMilli() < now.UnixMilli()) and the takeover is for the
// same payload: r or claim carries no Fingerprint, or both carry the same. A
// lapsed owner's record thus stays bound to the payload it was claimed with
// until it expires; only a retry of that payload takes it over. A foreign
// record (a Version other than RecordVersion, or no Lease: another library's,
// or a later format's) is never taken over, nor is an INPROGRESS record
// without a lease end: they are replaced only once they expire.
func (r *Record) Replaceable(claim *Record, now time.Time) bool {
	if r.Expired(now) {
		return true
	}
	return r.Status == StatusInProgress && r.Version == RecordVersion && r.Lease != "" && !r.LeaseExpiresAt.IsZero() &&
		r.LeaseExpiresAt.UnixMilli() < now.UnixMilli() &&
		(r.Fingerprint == "" || claim.Fingerprint == "" || r.Fingerprint == claim.Fingerprint)
}

// Expired reports whether r no longer counts at now (ExpiresAt.Unix() <
// now.Unix(): the second granularity of the stores' conditions and TTL).
func (r *Record) Expired(now time.Time) bool {
	return r.ExpiresAt.Unix() < now.Unix()
}

// Response returns the response a completed record holds, decoded from Data
// (which may be compressed): the bytes of the codec of the front door that
// stored it (JSON by default; an HTTP front door's stored form). stored is
// false for a record completed without its response (too large to keep, or
// not serializable), whose duplicates get idempotent.ErrResponseNotStored.
// Data that does not decode is an error wrapping ErrCorruptRecord. The engine
// reads every replay this way; so can tools that read records (the idemkit
// command, with an AdminStore's Get and Scan).
func (r *Record) Response() (response []byte, stored bool, err error) {
	response, stored, err = envelope.Decode(r.Data)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	return response, stored, nil
}
