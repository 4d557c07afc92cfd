package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var (
	_ storage.Store     = (*Store)(nil)
	_ storage.StepStore = (*Store)(nil)
	_ storage.TxStore   = (*Store)(nil)
)

// ErrInvalidText is returned (wrapped), before any call, for a record ID or
// step name that PostgreSQL's text type cannot hold: invalid UTF-8, or a
// NUL byte. The engine's IDs are "<prefix>#<hex>", so only a prefix or step
// name given so can cause it. Nothing is written.
var ErrInvalidText = errors.New("pgstore: PostgreSQL text cannot hold invalid UTF-8 or a NUL byte")

// Store is a storage.Store kept in a PostgreSQL table (schema.sql), through
// pgx. It is also a storage.StepStore, a storage.TxStore, a
// storage.ClaimManyStore and a storage.FinishManyStore. Create it with New.
// A Store is safe for concurrent use.
type Store struct {
	db    DB
	opts  Options
	table string // quoted, schema-qualified when Options.Schema is set
	sql   statements
}

// New returns a Store that keeps its records in the table Options names,
// through db: a *pgxpool.Pool created once, at start-up, and shared. The
// options start from the defaults documented on Options; each optFn then
// modifies them. The table must exist: see Store.CreateTable and
// schema.sql.
//
// New panics if db is nil: a programmer error, found at start-up.
func New(db DB, optFns ...func(*Options)) *Store {
	if db == nil {
		panic("pgstore: New: nil db")
	}
	opts := defaultOptions()
	for _, fn := range optFns {
		fn(&opts)
	}
	opts.normalize()
	table := opts.qualifiedTable()
	return &Store{db: db, opts: opts, table: table, sql: newStatements(table)}
}

// Options returns a copy of the Store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// claimAttempts bounds Claim's statements: a second runs only when the first
// met a row its snapshot could not see (see claimSQL), which a new snapshot
// sees; a third is for a row that was deleted again in between.
const claimAttempts = 3

// Claim implements storage.Store with one statement (claimSQL): INSERT …
// ON CONFLICT (id) DO UPDATE … WHERE <the stored record may be replaced>,
// which also returns the stored row it decided on, locked. A new key costs
// one round trip, and so does a refused claim: the live record comes back
// in the same answer, and a duplicate key is never an error. Expired records
// count as absent: any claim replaces them.
//
// Replacing another owner's INPROGRESS record is a takeover
// (ClaimResult.TookOver), or a resume (ClaimResult.Resumed) when its owner
// suspended it. A claim that replaces a record resumable for rec
// (storage.Record.Resumable) keeps its steps in the same statement and
// returns them. A record carrying rec.Lease is the caller's own: a claim
// retried after its response was lost counts as made, without a write, with
// the record's steps if it is resumable.
func (s *Store) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if err := checkText("record id", rec.ID); err != nil {
		return storage.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	nowS, nowMs := time.Unix(now.Unix(), 0), time.UnixMilli(now.UnixMilli())
	for attempt := 1; attempt <= claimAttempts; attempt++ {
		var (
			claimed, updated, found bool
			keptNames               []string
			keptData                [][]byte
			old                     row
		)
		err := s.db.QueryRow(ctx, s.sql.claim, s.opts.QueryExecMode,
			rec.ID, string(rec.Status), seconds(rec.ExpiresAt), millis(rec.LeaseExpiresAt), rec.Lease, rec.Fingerprint,
			nullBytes(rec.Data), rec.Version, nowS, nowMs,
		).Scan(append([]any{&claimed, &keptNames, &keptData, &updated, &found}, old.dest()...)...)
		if err != nil {
			return storage.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
		}
		if res, done, err := decideClaim(&rec, now, claimAnswer{claimed, updated, found, keptNames, keptData, &old}); done {
			return res, err
		}
		// Refused by a row the snapshot could not see: look again.
	}
	return storage.ClaimResult{}, unreadRefusal(rec.ID)
}

// unreadRefusal is the error of a claim of record id refused claimAttempts
// times by a row no statement could read.
func unreadRefusal(id string) error {
	return fmt.Errorf("pgstore: claim: record %s: refused %d times by a record no statement could read", id, claimAttempts)
}

// claimAnswer is what claimSQL (or claimManySQL) answered for one record:
// whether it wrote (with the steps it kept, and whether it updated a row),
// and the stored row it locked (found: there was one).
type claimAnswer struct {
	claimed, updated, found bool
	keptNames               []string
	keptData                [][]byte
	old                     *row
}

// decideClaim turns a claim statement's answer for rec at now into Claim's
// result. done is false when a row the statement's snapshot did not see
// refused the claim: the statement must run again.
func decideClaim(rec *storage.Record, now time.Time, a claimAnswer) (res storage.ClaimResult, done bool, err error) {
	old := a.old
	old.fill()
	switch {
	case a.claimed:
		res := storage.ClaimResult{Claimed: true, Steps: toSteps(a.keptNames, a.keptData)}
		switch {
		case a.found && old.lease != rec.Lease && old.status == string(storage.StatusInProgress):
			res.Resumed = old.suspended
			res.TookOver = !old.suspended
		case !a.found && a.updated:
			// A row the statement's snapshot did not see (see
			// claimSQL): claimed moments ago and already lapsed. Whether
			// it was suspended is unknown; a claim's row never is.
			res.TookOver = true
		}
		if len(a.keptNames) != len(a.keptData) {
			return storage.ClaimResult{}, true, fmt.Errorf("pgstore: claim: record %s: %w: %d step names but %d results",
				rec.ID, storage.ErrCorruptRecord, len(a.keptNames), len(a.keptData))
		}
		return res, true, nil
	case a.found && old.lease == rec.Lease:
		// The caller's own record: nothing written.
		existing, err := old.record(rec.ID)
		if err != nil {
			return storage.ClaimResult{}, true, fmt.Errorf("pgstore: claim: %w", err)
		}
		res := storage.ClaimResult{Claimed: true}
		if existing.Resumable(rec, now) {
			res.Steps = existing.Steps
		}
		return res, true, nil
	case a.found:
		existing, err := old.record(rec.ID)
		if err != nil {
			return storage.ClaimResult{}, true, fmt.Errorf("pgstore: claim: %w", err)
		}
		return storage.ClaimResult{Existing: &existing}, true, nil
	}
	return storage.ClaimResult{}, false, nil
}

// Complete implements storage.Store with one UPDATE … WHERE id = $1 AND
// lease = $2 (completeSQL), fenced on the lease alone so that a retried
// completion succeeds again; it clears the lease end, the steps and the
// suspended flag. A record larger than Options.MaxItemBytes is refused
// before any call.
func (s *Store) Complete(ctx context.Context, rec storage.Record) error {
	if err := s.checkComplete(&rec); err != nil {
		return fmt.Errorf("pgstore: complete: %w", err)
	}
	return s.complete(ctx, s.db, &rec, "complete")
}

// checkComplete refuses, before any call, a completion the store cannot hold.
func (s *Store) checkComplete(rec *storage.Record) error {
	if size := recordSize(rec); size > s.opts.MaxItemBytes {
		return fmt.Errorf("%w: the record would be %d bytes (limit %d)", storage.ErrTooLarge, size, s.opts.MaxItemBytes)
	}
	return nil
}

// querier is what complete runs on: the pool, or the handler's transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// complete runs completeSQL on q.
func (s *Store) complete(ctx context.Context, q querier, rec *storage.Record, op string) error {
	var (
		done    bool
		status  *string
		ourRow  *bool
		expires = seconds(rec.ExpiresAt)
	)
	err := q.QueryRow(ctx, s.sql.complete, s.opts.QueryExecMode, rec.ID, rec.Lease, string(rec.Status), nullBytes(rec.Data), expires, nullText(rec.Trace)).
		Scan(&done, &status, &ourRow)
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if !done {
		return fenced(op, status, ourRow)
	}
	return nil
}

// Release implements storage.Store with one DELETE … WHERE id = $1 AND
// lease = $2 AND status = 'INPROGRESS' (releaseSQL). A record that is already
// gone is not an error; the caller's completed record is kept
// (storage.ErrAlreadyCompleted). The DELETE waits for a transaction that
// holds the row (a COMMIT of the caller's own run still under way) and
// decides on what it committed.
func (s *Store) Release(ctx context.Context, id, lease string) error {
	var (
		done   bool
		status *string
		ourRow *bool
	)
	if err := s.db.QueryRow(ctx, s.sql.release, s.opts.QueryExecMode, id, lease).Scan(&done, &status, &ourRow); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	if done || status == nil {
		return nil
	}
	return s.notGivenBack(ctx, "release", id, lease, status, ourRow)
}

// notGivenBack is the error of a release or suspend of record id under
// lease that did not write, the row being status and ourRow in the
// statement's snapshot. The caller's completed record means its completion
// landed (storage.ErrAlreadyCompleted). The caller's record still in
// progress in the snapshot means the row changed while the statement waited
// for its lock: a transaction that held it committed (the caller's own
// run's COMMIT, or a takeover), which only a new snapshot shows, so the
// record is read again — the one extra round trip, on this rare path only.
func (s *Store) notGivenBack(ctx context.Context, op, id, lease string, status *string, ourRow *bool) error {
	ours := ourRow != nil && *ourRow
	if ours && *status == string(storage.StatusInProgress) {
		rec, err := s.Get(ctx, id)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("pgstore: %s: read the record that changed under the write: %w", op, err)
		}
		st, mine := string(rec.Status), rec.Lease == lease
		status, ourRow = &st, &mine
		ours = mine
	}
	if ours && *status == string(storage.StatusCompleted) {
		return fmt.Errorf("pgstore: %s: %w", op, storage.ErrAlreadyCompleted)
	}
	return fenced(op, status, ourRow)
}

// fenced is the error of op's write fenced by the lease that did not
// happen: the stored row (from the statement's snapshot) had status and
// ourRow (whether it carries the caller's lease); both nil: no row.
func fenced(op string, status *string, ourRow *bool) error {
	switch {
	case status == nil:
		return fmt.Errorf("pgstore: %s: %w (the record is gone)", op, storage.ErrLeaseLost)
	case ourRow != nil && *ourRow:
		return fmt.Errorf("pgstore: %s: %w (the record is no longer in progress: status %s)", op, storage.ErrLeaseLost, *status)
	}
	return fmt.Errorf("pgstore: %s: %w (the record is %s under another lease)", op, storage.ErrLeaseLost, *status)
}

// row is a stored record as a statement returns its columns (see columns).
type row struct {
	status      string
	expiresAt   time.Time
	leaseEnd    *time.Time
	lease       string
	fingerprint string
	data        []byte
	version     int32
	stepNames   []string
	stepData    [][]byte
	suspended   bool
	trace       *string // NULL: none
	// nullable copies, for statements that may return no row (a LEFT JOIN)
	nStatus, nLease, nFingerprint *string
	nExpiresAt                    *time.Time
	nVersion                      *int32
	nSuspended                    *bool
}

// dest returns the scan destinations of columns, nullable (see fill).
func (r *row) dest() []any {
	return []any{&r.nStatus, &r.nExpiresAt, &r.leaseEnd, &r.nLease, &r.nFingerprint, &r.data, &r.nVersion, &r.stepNames, &r.stepData, &r.nSuspended, &r.trace}
}

// fill copies the nullable columns dest scanned into row's fields (zero
// for NULL) and reports whether there was a row (a status).
func (r *row) fill() bool {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	r.status, r.lease, r.fingerprint = deref(r.nStatus), deref(r.nLease), deref(r.nFingerprint)
	if r.nExpiresAt != nil {
		r.expiresAt = *r.nExpiresAt
	}
	if r.nVersion != nil {
		r.version = *r.nVersion
	}
	r.suspended = r.nSuspended != nil && *r.nSuspended
	return r.nStatus != nil
}

// record decodes the row of record id; a row that is not a record of any
// format this package knows yields a *storage.CorruptRecordError.
func (r *row) record(id string) (storage.Record, error) {
	r.fill()
	rec := storage.Record{
		ID:          id,
		Status:      storage.Status(r.status),
		ExpiresAt:   r.expiresAt,
		Lease:       r.lease,
		Fingerprint: r.fingerprint,
		Data:        r.data,
		Version:     int(r.version),
		Suspended:   r.suspended,
	}
	if r.trace != nil {
		rec.Trace = *r.trace
	}
	if r.leaseEnd != nil {
		rec.LeaseExpiresAt = *r.leaseEnd
	}
	if rec.Status != storage.StatusInProgress && rec.Status != storage.StatusCompleted {
		return storage.Record{}, &storage.CorruptRecordError{ID: id, Err: fmt.Errorf("%w: status %q", storage.ErrCorruptRecord, r.status)}
	}
	if len(r.stepNames) != len(r.stepData) {
		return storage.Record{}, &storage.CorruptRecordError{ID: id,
			Err: fmt.Errorf("%w: %d step names but %d results", storage.ErrCorruptRecord, len(r.stepNames), len(r.stepData))}
	}
	rec.Steps = toSteps(r.stepNames, r.stepData)
	return rec, nil
}

// toSteps pairs names and results (nil for none).
func toSteps(names []string, data [][]byte) []storage.Step {
	if len(names) == 0 || len(names) != len(data) {
		return nil
	}
	steps := make([]storage.Step, len(names))
	for i := range names {
		steps[i] = storage.Step{Name: names[i], Data: data[i]}
	}
	return steps
}

// recordSize is a completed record's size as Options.MaxItemBytes counts it
// (a completion drops the steps).
func recordSize(rec *storage.Record) int {
	return len(rec.ID) + len(rec.Status) + len(rec.Lease) + len(rec.Fingerprint) + len(rec.Data) + len(rec.Trace) + fixedBytes
}

// nullText is s, or nil (NULL) for "".
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// seconds truncates t to whole seconds, as expires_at is stored and compared.
func seconds(t time.Time) time.Time { return time.Unix(t.Unix(), 0) }

// millis truncates t to milliseconds, as lease_expires_at is stored and
// compared; nil (NULL) for the zero time.
func millis(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	m := time.UnixMilli(t.UnixMilli())
	return &m
}

// nullBytes is b, or nil (NULL) when empty.
func nullBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// checkText refuses a value PostgreSQL's text cannot hold.
func checkText(what, v string) error {
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s %q", ErrInvalidText, what, v)
	}
	return nil
}
