package idempotent_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// clock is a settable time source for lease and expiry tests that never sleep.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// spyStore counts calls, records claims and injects faults in front of a
// MemoryStore.
type spyStore struct {
	storage.StepStore
	claims, completes, releases atomic.Int32

	mu         sync.Mutex
	lastClaim  storage.Record
	claimErr   error
	completeFn func(storage.Record) error
	releaseErr error
}

func newSpyStore() *spyStore { return &spyStore{StepStore: idempotent.NewMemoryStore()} }

func (s *spyStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.claims.Add(1)
	s.mu.Lock()
	s.lastClaim = rec
	err := s.claimErr
	s.mu.Unlock()
	if err != nil {
		return storage.ClaimResult{}, err
	}
	return s.StepStore.Claim(ctx, rec, now)
}

func (s *spyStore) Complete(ctx context.Context, rec storage.Record) error {
	s.completes.Add(1)
	s.mu.Lock()
	fn := s.completeFn
	s.mu.Unlock()
	if fn != nil {
		if err := fn(rec); err != nil {
			return err
		}
	}
	return s.StepStore.Complete(ctx, rec)
}

func (s *spyStore) Release(ctx context.Context, id, lease string) error {
	s.releases.Add(1)
	s.mu.Lock()
	err := s.releaseErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.StepStore.Release(ctx, id, lease)
}

func (s *spyStore) calls() int {
	return int(s.claims.Load() + s.completes.Load() + s.releases.Load())
}

func (s *spyStore) claimed() storage.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastClaim
}

// outcomes collects outcome events.
type outcomes struct {
	mu     sync.Mutex
	events []idempotent.Event
}

func (o *outcomes) hook(_ context.Context, e idempotent.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *outcomes) list() []idempotent.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]idempotent.Outcome, len(o.events))
	for i, e := range o.events {
		out[i] = e.Outcome
	}
	return out
}

func (o *outcomes) last() idempotent.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.events[len(o.events)-1]
}

type order struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

type receipt struct {
	OrderID string `json:"orderId"`
	Run     int32  `json:"run"`
}

func orderKey(o order) (string, error) { return o.ID, nil }
