package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// claimFault is what a flakyStore does to a key's first claim.
type claimFault int

const (
	claimFine   claimFault = iota
	claimLost              // fails before it reaches the store
	claimUnsure            // lands, and its answer is lost
)

// flakyStore is the memory store (with its many-records capabilities) whose
// first claim of some keys fails, before or after it lands; dead drops every
// write but claims, as a process that crashed after its claim wave would.
type flakyStore struct {
	mem interface {
		storage.StepStore
		storage.ClaimManyStore
		storage.FinishManyStore
		storage.AdminStore
	}
	mu     sync.Mutex
	faults map[string]claimFault // by record id; used once
	dead   bool
}

// singleFinishes is a store's view without storage.FinishManyStore.
type singleFinishes interface {
	storage.StepStore
	storage.ClaimManyStore
}

var errFlaky = errors.New("flaky store: connection reset")

func (s *flakyStore) fault(id string) claimFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[id]
	delete(s.faults, id)
	return f
}

func (s *flakyStore) claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	switch s.fault(rec.ID) {
	case claimLost:
		return storage.ClaimResult{}, errFlaky
	case claimUnsure:
		if _, err := s.mem.Claim(ctx, rec, now); err != nil {
			return storage.ClaimResult{}, err
		}
		return storage.ClaimResult{}, errFlaky
	}
	return s.mem.Claim(ctx, rec, now)
}

func (s *flakyStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	return s.claim(ctx, rec, now)
}

func (s *flakyStore) ClaimMany(ctx context.Context, recs []storage.Record, now time.Time) ([]storage.ClaimOutcome, error) {
	out := make([]storage.ClaimOutcome, len(recs))
	for i, rec := range recs {
		out[i].Result, out[i].Err = s.claim(ctx, rec, now)
	}
	return out, nil
}

func (s *flakyStore) write() error {
	if s.dead {
		return errFlaky
	}
	return nil
}

func (s *flakyStore) Complete(ctx context.Context, rec storage.Record) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.mem.Complete(ctx, rec)
}

func (s *flakyStore) CompleteMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := s.write(); err != nil {
		return nil, err
	}
	return s.mem.CompleteMany(ctx, recs)
}

func (s *flakyStore) Release(ctx context.Context, id, lease string) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.mem.Release(ctx, id, lease)
}

func (s *flakyStore) ReleaseMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := s.write(); err != nil {
		return nil, err
	}
	return s.mem.ReleaseMany(ctx, recs)
}

func (s *flakyStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.mem.AppendStep(ctx, id, lease, step)
}

func (s *flakyStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.mem.Suspend(ctx, id, lease, leaseEnd)
}

// TestWaveProperty: the checkpoint property (TestCheckpointProperty) holds
// for batches claimed in one wave and completed in another, also when a
// store fails some keys' first claims (before or after they land) and when
// an earlier invocation crashed between its claim wave and its completions
// (its claims left to their leases, its completions lost): each lane runs in
// order, no record before a checkpoint is lost, same-key records never
// overlap, after the redelivery every key's handler has succeeded exactly
// once in the invocations that lived, and no record is left in progress.
func TestWaveProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		units := rapid.IntRange(1, 3).Draw(t, "units")
		keys := rapid.IntRange(1, 8).Draw(t, "keys")
		recs := make([]rec, n)
		for i := range recs {
			recs[i] = rec{
				ID:   i,
				Unit: fmt.Sprintf("shard-%d", rapid.IntRange(0, units-1).Draw(t, "unit")),
				Key:  fmt.Sprintf("k%d", rapid.IntRange(0, keys-1).Draw(t, "key")),
				Fail: rapid.Float64Range(0, 1).Draw(t, "p") < 0.3,
			}
		}
		stop := rapid.Bool().Draw(t, "stop")
		byKey := rapid.Bool().Draw(t, "lanes by key")
		parallelism := rapid.IntRange(1, 3).Draw(t, "parallelism")
		crashedAfter := rapid.IntRange(-1, n).Draw(t, "records an earlier invocation ran before it crashed (-1: none)")

		clock := time.Unix(1_800_000_000, 0)
		now := func() time.Time { return clock }
		mem := idempotent.NewMemoryStore().(interface {
			storage.StepStore
			storage.ClaimManyStore
			storage.FinishManyStore
			storage.AdminStore
		})
		store := &flakyStore{mem: mem, faults: map[string]claimFault{}}
		for k := range keys {
			f := claimFault(rapid.IntRange(0, 2).Draw(t, "claim fault"))
			store.faults[idempotent.RecordID(testPrefix, "", fmt.Sprintf("k%d", k))] = f
		}
		opts := []idempotent.Option{idempotent.WithLogger(slog.New(slog.DiscardHandler)), idempotent.WithPrefix(testPrefix),
			idempotent.WithClock(now), idempotent.WithMaxLease(time.Minute)}
		source := func(w *world) batch.Source[rec, rec] {
			return batch.Source[rec, rec]{
				Name: "test", Noun: "record", Handle: w.handle,
				Decode:  func(r *rec) (rec, error) { return *r, nil },
				Key:     func(r *rec, _ rec) (string, error) { return r.Key, nil },
				Attrs:   func(r *rec) []slog.Attr { return []slog.Attr{slog.Int("id", r.ID)} },
				Context: func(ctx context.Context, _ *rec) context.Context { return ctx },
			}
		}
		laneOf := func(rs []rec) func(i int, _ string) string {
			return func(i int, _ string) string {
				if byKey {
					return rs[i].Unit + "/" + rs[i].Key
				}
				return rs[i].Unit
			}
		}
		unitOf := func(rs []rec) func(int) string { return func(i int) string { return rs[i].Unit } }

		if crashedAfter >= 0 {
			// An earlier delivery of the batch: its invocation claimed every
			// key in one wave, ran the first records, and died before any
			// completion or give-back got out.
			dead := &flakyStore{mem: mem, dead: true}
			e := idempotent.New(dead, opts...)
			crashed := &world{succeeded: map[string]int{}, active: map[string]int{}}
			calls := make([]idempotent.Call, n)
			for i, r := range recs {
				calls[i] = idempotent.Call{Key: r.Key}
			}
			wave := e.ClaimBatch(context.Background(), calls)
			for i := range min(crashedAfter, n) {
				_, _ = wave.Do(context.Background(), i, func(ctx context.Context) ([]byte, error) {
					return []byte("{}"), crashed.handle(ctx, recs[i])
				})
			}
			wave.Close(context.Background())   // its writes are dropped: nothing is given back
			clock = clock.Add(2 * time.Minute) // its leases end
		}

		w := &world{succeeded: map[string]int{}, active: map[string]int{}, failing: true}
		var live storage.Store = store
		if !rapid.Bool().Draw(t, "the store writes many completions in one call") {
			// DynamoDB's shape: each completion and give-back on its own.
			live = struct {
				singleFinishes
			}{store}
		}
		p := batch.New(idempotent.New(live, opts...), "Wrap", source(w),
			settings(batch.WithParallelism[rec](parallelism), continueIf(!stop)))
		results := p.Run(context.Background(), recs, batch.Order{Lane: laneOf(recs), Stop: stop, LaneNoun: "shard"})
		redeliver := checkDelivery(t, recs, results, w, stop, laneOf(recs), unitOf(recs))

		// The redelivery, failures fixed.
		w.failing = false
		again := p.Run(context.Background(), redeliver, batch.Order{Lane: laneOf(redeliver), Stop: stop})
		require.Empty(t, batch.Checkpoints(again, unitOf(redeliver)), "the redelivery leaves no checkpoint")
		for _, r := range recs {
			require.Equal(t, 1, w.succeeded[r.Key], "successful handler calls of key %s in the invocations that lived", r.Key)
		}
		require.NoError(t, mem.Scan(context.Background(), storage.ScanOptions{}, func(r storage.Record, err error) bool {
			require.NoError(t, err)
			require.Equal(t, storage.StatusCompleted, r.Status, "record %s left %s by a finished invocation", r.ID, r.Status)
			return true
		}))
	})
}
