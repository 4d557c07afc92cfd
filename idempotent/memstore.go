package idempotent

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// memoryStore is a storage.Store held in process memory (see NewMemoryStore).
// The zero value is ready to use.
type memoryStore struct {
	mu sync.Mutex
	// records are held by pointer: a growing map then moves pointers, not
	// whole records, and an update changes a record where it is.
	records map[string]*storage.Record
}

var (
	_ storage.StepStore       = (*memoryStore)(nil)
	_ storage.AdminStore      = (*memoryStore)(nil)
	_ storage.ClaimManyStore  = (*memoryStore)(nil)
	_ storage.FinishManyStore = (*memoryStore)(nil)
)

// NewMemoryStore returns an empty store held in process memory, with the
// same semantics as the DynamoDB store (steps included: it is a
// storage.StepStore, a storage.ClaimManyStore, a storage.FinishManyStore,
// and a storage.AdminStore for tools' tests), for unit tests, demos and single-process use. It refuses
// records past storage.DefaultMaxItemBytes, as DynamoDB does. Records are
// lost when the process ends. It is safe for concurrent use.
func NewMemoryStore() storage.StepStore { return &memoryStore{} }

// Claim implements storage.Store.
func (s *memoryStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return storage.ClaimResult{}, err
	}
	normalizeTimes(&rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.records[rec.ID]
	if exists && old.Lease != rec.Lease && !old.Replaceable(&rec, now) {
		return storage.ClaimResult{Existing: cloneRecord(old)}, nil
	}
	if s.records == nil {
		s.records = make(map[string]*storage.Record)
	}
	rec.Data = append([]byte(nil), rec.Data...)
	rec.Steps, rec.Suspended = nil, false // never the caller's: none, or the old record's below
	rec.Trace = ""                        // a claimed record holds none (storage.Record.Trace)
	var kept []storage.Step
	if exists && old.Resumable(&rec, now) {
		rec.Steps, kept = old.Steps, cloneSteps(old.Steps)
	}
	held := new(storage.Record) // not &rec: that would put every claim's rec on the heap, refused ones too
	*held = rec
	s.records[rec.ID] = held
	replaced := exists && old.Lease != rec.Lease && old.Status == storage.StatusInProgress
	resumed := replaced && old.Suspended
	return storage.ClaimResult{Claimed: true, TookOver: replaced && !resumed, Resumed: resumed, Steps: kept}, nil
}

// ClaimMany implements storage.ClaimManyStore: each record's Claim in turn.
func (s *memoryStore) ClaimMany(ctx context.Context, recs []storage.Record, now time.Time) ([]storage.ClaimOutcome, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return nil, fmt.Errorf("memory store: claim many: %w", err)
	}
	out := make([]storage.ClaimOutcome, len(recs))
	for i, rec := range recs {
		out[i].Result, out[i].Err = s.Claim(ctx, rec, now)
	}
	return out, nil
}

// CompleteMany implements storage.FinishManyStore: each record's Complete
// in turn.
func (s *memoryStore) CompleteMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := checkMany(ctx, "complete many", recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	errs := make([]error, len(recs))
	for i := range recs {
		errs[i] = s.Complete(ctx, recs[i])
	}
	return errs, nil
}

// ReleaseMany implements storage.FinishManyStore: each record's Release in
// turn.
func (s *memoryStore) ReleaseMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := checkMany(ctx, "release many", recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	errs := make([]error, len(recs))
	for i := range recs {
		errs[i] = s.Release(ctx, recs[i].ID, recs[i].Lease)
	}
	return errs, nil
}

// checkMany is what a many call checks before it decides anything: no
// records is no call, an ended ctx and duplicate IDs fail it whole.
func checkMany(ctx context.Context, op string, recs []storage.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return fmt.Errorf("memory store: %s: %w", op, err)
	}
	return nil
}

// Complete implements storage.Store.
func (s *memoryStore) Complete(ctx context.Context, rec storage.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if size, limit := recordSize(&rec), storage.DefaultMaxItemBytes; size > limit {
		return fmt.Errorf("%w: %d bytes (limit %d)", storage.ErrTooLarge, size, limit)
	}
	data := append([]byte(nil), rec.Data...) // outside the lock
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[rec.ID]
	if !ok || old.Lease != rec.Lease {
		return storage.ErrLeaseLost
	}
	old.Status = rec.Status
	old.Data = data
	old.Trace = rec.Trace
	old.ExpiresAt = time.Unix(rec.ExpiresAt.Unix(), 0) // as normalizeTimes
	old.LeaseExpiresAt = time.Time{}
	old.Steps, old.Suspended = nil, false
	return nil
}

// AppendStep implements storage.StepStore.
func (s *memoryStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[id]
	if !ok || old.Lease != lease || old.Status != storage.StatusInProgress {
		return storage.ErrLeaseLost
	}
	grown := *old
	grown.Steps = append(cloneSteps(old.Steps), storage.Step{Name: step.Name, Data: append([]byte(nil), step.Data...)})
	if size, limit := recordSize(&grown), storage.DefaultMaxItemBytes; size > limit {
		return fmt.Errorf("%w: %d bytes with step %q (limit %d)", storage.ErrTooLarge, size, step.Name, limit)
	}
	*old = grown
	return nil
}

// Suspend implements storage.StepStore.
func (s *memoryStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[id]
	if !ok {
		return nil
	}
	if err := givenBack(old, lease); err != nil {
		return err
	}
	old.LeaseExpiresAt = time.UnixMilli(leaseEnd.UnixMilli())
	old.Suspended = true
	return nil
}

// Release implements storage.Store.
func (s *memoryStore) Release(ctx context.Context, id, lease string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[id]
	if !ok {
		return nil
	}
	if err := givenBack(old, lease); err != nil {
		return err
	}
	delete(s.records, id)
	return nil
}

// givenBack is the fence of Release and Suspend on the stored record old:
// nil when the caller may give it back (its lease, in progress).
func givenBack(old *storage.Record, lease string) error {
	switch {
	case old.Lease != lease:
		return storage.ErrLeaseLost
	case old.Status == storage.StatusCompleted:
		return storage.ErrAlreadyCompleted
	case old.Status != storage.StatusInProgress:
		return storage.ErrLeaseLost
	}
	return nil
}

// recordSize estimates a record's size the way DynamoDB counts an item: the
// lengths of attribute names and values, with the default attribute names.
func recordSize(r *storage.Record) int {
	const numberBytes = 21 // a stored number's worst case
	return len("id") + len(r.ID) +
		len("status") + len(r.Status) +
		len("expiration") + numberBytes +
		len("lease") + len(r.Lease) +
		len("validation") + len(r.Fingerprint) +
		len("trace") + len(r.Trace) +
		len("data") + len(r.Data) +
		len("version") + numberBytes +
		stepsSize(r.Steps)
}

// stepsSize is what a record's steps add, as a DynamoDB list of maps
// ({name, data}) counts: 3 bytes per element and per map, plus names and values.
func stepsSize(steps []storage.Step) int {
	if len(steps) == 0 {
		return 0
	}
	n := len("steps") + 3
	for _, st := range steps {
		n += 3 + 3 + len("name") + len(st.Name) + len("data") + len(st.Data)
	}
	return n
}

// normalizeTimes truncates r's times, in place, to the precision the
// DynamoDB store keeps.
func normalizeTimes(r *storage.Record) {
	r.ExpiresAt = time.Unix(r.ExpiresAt.Unix(), 0)
	if !r.LeaseExpiresAt.IsZero() {
		r.LeaseExpiresAt = time.UnixMilli(r.LeaseExpiresAt.UnixMilli())
	}
}

func cloneSteps(steps []storage.Step) []storage.Step {
	if steps == nil {
		return nil
	}
	out := make([]storage.Step, len(steps))
	for i, st := range steps {
		out[i] = storage.Step{Name: st.Name, Data: append([]byte(nil), st.Data...)}
	}
	return out
}

func cloneValue(r storage.Record) storage.Record {
	r.Data = append([]byte(nil), r.Data...)
	r.Steps = cloneSteps(r.Steps)
	return r
}

func cloneRecord(r *storage.Record) *storage.Record {
	c := cloneValue(*r)
	return &c
}

// Get implements storage.AdminStore.
func (s *memoryStore) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := ctx.Err(); err != nil {
		return storage.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	if !ok {
		return storage.Record{}, fmt.Errorf("memory store: get %s: %w", id, storage.ErrNotFound)
	}
	return cloneValue(*rec), nil
}

// Delete implements storage.AdminStore: every field is compared.
func (s *memoryStore) Delete(ctx context.Context, rec storage.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	normalizeTimes(&rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[rec.ID]
	switch {
	case !ok:
		return fmt.Errorf("memory store: delete %s: %w: %w", rec.ID, storage.ErrChanged, storage.ErrNotFound)
	case !sameAsRead(old, &rec):
		return fmt.Errorf("memory store: delete %s: %w", rec.ID, storage.ErrChanged)
	}
	delete(s.records, rec.ID)
	return nil
}

// sameAsRead reports whether the stored record a is still b as read.
func sameAsRead(a, b *storage.Record) bool {
	return a.Status == b.Status && a.ExpiresAt.Equal(b.ExpiresAt) && a.LeaseExpiresAt.Equal(b.LeaseExpiresAt) &&
		a.Lease == b.Lease && a.Fingerprint == b.Fingerprint && bytes.Equal(a.Data, b.Data) && a.Version == b.Version &&
		a.Suspended == b.Suspended && slices.EqualFunc(a.Steps, b.Steps, func(x, y storage.Step) bool {
		return x.Name == y.Name && bytes.Equal(x.Data, y.Data)
	})
}

// Scan implements storage.AdminStore: one page, in id order, of the
// records stored when it starts.
func (s *memoryStore) Scan(ctx context.Context, opts storage.ScanOptions, fn func(storage.Record, error) bool) error {
	s.mu.Lock()
	var recs []storage.Record
	scanned := int64(len(s.records))
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		r := s.records[id]
		if strings.HasPrefix(id, opts.IDPrefix) && (opts.Status == "" || r.Status == opts.Status) {
			recs = append(recs, cloneValue(*r))
		}
	}
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if opts.Progress != nil {
		opts.Progress(storage.ScanProgress{Pages: 1, Scanned: scanned, Matched: int64(len(recs))})
	}
	for _, r := range recs {
		if !fn(r, nil) {
			return nil
		}
	}
	return nil
}
