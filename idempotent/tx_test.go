package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// txFake is a storage.TxStore over the memory store whose writes are
// strings: a commit applies the record's completion and the writes together
// (under one lock), or neither. The database-backed stores prove the same
// rules against real servers; this fake pins the engine's side of them.
type txFake struct {
	storage.StepStore

	mu        sync.Mutex
	committed []string // writes that committed, in txOrder
	begun     int
	commitErr error // returned by Commit before anything is applied
	// commitFault, when set, is what Commit does instead: see txFault.
	commitFault txFault
	held        []func() error // commits held by txHeld, applied by applyHeld
	releaseErr  error          // returned by Release (the settle fails too)
}

// txFault is an unknown commit outcome as a store meets it.
type txFault int

const (
	txNoFault    txFault = iota
	txNotReached         // the request never reached the database
	txCommitted          // it committed, and the answer was lost
	txHeld               // it is held in the network and applied later (applyHeld)
)

var errConnReset = errors.New("connection reset")

func (s *txFake) Release(ctx context.Context, id, lease string) error {
	s.mu.Lock()
	err := s.releaseErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.StepStore.Release(ctx, id, lease)
}

// applyHeld applies the held commits, as the database would when the
// request reaches it at last, and returns their errors.
func (s *txFake) applyHeld() []error {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	var errs []error
	for _, apply := range held {
		errs = append(errs, apply())
	}
	return errs
}

func newTxFake() *txFake { return &txFake{StepStore: idempotent.NewMemoryStore()} }

func (s *txFake) BeginTx(_ context.Context, id, lease string) (storage.Tx, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begun++
	return &fakeTx{s: s, id: id, lease: lease}, nil
}

func (s *txFake) writes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.committed...)
}

type fakeTx struct {
	s         *txFake
	id, lease string
	mu        sync.Mutex
	pending   []string
}

func (t *fakeTx) add(w string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, w)
}

func (t *fakeTx) Commit(ctx context.Context, rec storage.Record) error {
	t.s.mu.Lock()
	switch t.s.commitFault {
	case txNotReached:
		t.s.mu.Unlock()
		return errConnReset
	case txCommitted:
		t.s.mu.Unlock()
		if err := t.apply(ctx, rec, t.writes()); err != nil {
			return err
		}
		return errConnReset
	case txHeld:
		writes := t.writes() // what the request carries, whatever Rollback does later
		t.s.held = append(t.s.held, func() error { return t.apply(context.Background(), rec, writes) })
		t.s.mu.Unlock()
		return errConnReset
	}
	t.s.mu.Unlock()
	return t.apply(ctx, rec, t.writes())
}

func (t *fakeTx) writes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.pending...)
}

// apply commits rec's completion, conditioned as a real store's is (the
// caller's lease, in progress, not suspended), and the writes, atomically.
func (t *fakeTx) apply(ctx context.Context, rec storage.Record, writes []string) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.commitErr != nil {
		return t.s.commitErr
	}
	if rec.ID != "" {
		res, err := t.s.StepStore.Claim(ctx, storage.Record{ID: rec.ID, Lease: "probe", Status: storage.StatusInProgress,
			Version: storage.RecordVersion, ExpiresAt: rec.ExpiresAt, LeaseExpiresAt: rec.ExpiresAt}, time.Unix(0, 0))
		if err != nil {
			return err
		}
		if res.Claimed { // no record: the fence fails, and the probe goes
			_ = t.s.StepStore.Release(ctx, rec.ID, "probe")
			return storage.ErrLeaseLost
		}
		if ex := res.Existing; ex.Lease != t.lease || ex.Status != storage.StatusInProgress || ex.Suspended {
			return storage.ErrLeaseLost
		}
		if err := t.s.StepStore.Complete(ctx, rec); err != nil {
			return err // the fence failed: nothing of this run is applied
		}
	}
	t.s.committed = append(t.s.committed, writes...)
	return nil
}

func (t *fakeTx) Rollback(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = nil
	return nil
}

// addWrite is what a store's typed accessor does: find the run's Tx and add.
func addWrite(ctx context.Context, w string) error {
	tx, err := storage.TxFromContext(ctx)
	if err != nil {
		return err
	}
	tx.(*fakeTx).add(w)
	return nil
}

type txOrder struct {
	ID string `json:"id"`
}

func txOrderKey(o txOrder) (string, error) { return o.ID, nil }

func TestTransactionCommitsWithTheCompletion(t *testing.T) {
	store := newTxFake()
	eng := idempotent.New(store)
	runs := 0
	h := idempotent.Wrap(eng, func(ctx context.Context, o txOrder) (string, error) {
		runs++
		require.NoError(t, addWrite(ctx, "ledger "+o.ID))
		require.NoError(t, addWrite(ctx, "stock "+o.ID))
		return "ok " + o.ID, nil
	}, idempotent.WithKey(txOrderKey))

	for range 3 {
		out, err := h(t.Context(), txOrder{ID: "o1"})
		require.NoError(t, err)
		assert.Equal(t, "ok o1", out)
	}
	assert.Equal(t, 1, runs, "duplicates are replayed")
	assert.Equal(t, []string{"ledger o1", "stock o1"}, store.writes(), "the writes committed once, with the completion")
	assert.Equal(t, 1, store.begun)
}

func TestARunThatAddsNothingBeginsNoTransaction(t *testing.T) {
	store := newTxFake()
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o txOrder) (string, error) { return "ok", nil },
		idempotent.WithKey(txOrderKey))
	_, err := h(t.Context(), txOrder{ID: "o1"})
	require.NoError(t, err)
	assert.Zero(t, store.begun)
}

func TestAFailedHandlerConditionCommitsNothingAndReleases(t *testing.T) {
	store := newTxFake()
	cancelled := fmt.Errorf("%w: write 1 (stock): ConditionalCheckFailed", storage.ErrTxAborted)
	store.commitErr = cancelled
	var events []idempotent.Event
	eng := idempotent.New(store, idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) { events = append(events, e) }))
	runs := 0
	h := idempotent.Wrap(eng, func(ctx context.Context, o txOrder) (string, error) {
		runs++
		return "ok", addWrite(ctx, "stock -1")
	}, idempotent.WithKey(txOrderKey))

	_, err := h(t.Context(), txOrder{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrTxAborted)
	assert.ErrorContains(t, err, "stock")
	require.Len(t, events, 1)
	assert.Equal(t, idempotent.OutcomeHandlerError, events[0].Outcome)
	assert.Empty(t, store.writes())

	store.mu.Lock()
	store.commitErr = nil
	store.mu.Unlock()
	out, err := h(t.Context(), txOrder{ID: "o1"})
	require.NoError(t, err, "the record was released: the retry runs")
	assert.Equal(t, "ok", out)
	assert.Equal(t, 2, runs)
	assert.Equal(t, []string{"stock -1"}, store.writes())
}

func TestAStaleOwnerCommitsNothingAndGetsNoSuccess(t *testing.T) {
	store := newTxFake()
	clk := newClock()
	eng := idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second))
	stale := make(chan struct{})
	resume := make(chan struct{})
	h := idempotent.Wrap(eng, func(ctx context.Context, o txOrder) (string, error) {
		if o.ID == "stale" {
			require.NoError(t, addWrite(ctx, "ledger by the stale owner"))
			close(stale)
			<-resume
			return "stale", nil
		}
		return "new", addWrite(ctx, "ledger by the new owner")
	}, idempotent.WithKey(func(txOrder) (string, error) { return "k", nil }))

	var staleErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, staleErr = h(context.Background(), txOrder{ID: "stale"})
	}()
	<-stale
	clk.Advance(time.Minute) // the stale owner's lease lapsed
	out, err := h(t.Context(), txOrder{ID: "new"})
	require.NoError(t, err)
	assert.Equal(t, "new", out)
	close(resume)
	<-done

	require.ErrorIs(t, staleErr, idempotent.ErrInProgress, "a caller whose writes did not commit gets what a retry gets")
	require.ErrorIs(t, staleErr, storage.ErrLeaseLost)
	assert.Equal(t, []string{"ledger by the new owner"}, store.writes())
	out, err = h(t.Context(), txOrder{ID: "stale"})
	require.NoError(t, err)
	assert.Equal(t, "new", out, "the retry gets the new owner's replay")
}

// TestAnUnknownCommitOutcomeIsSettledByTheFence: a commit whose outcome is
// unknown is settled at once by a release fenced by the run's lease and
// INPROGRESS (docs/transactions.md), with and without steps (Suspend then
// keeps them): the caller gets its response when the commit landed, and
// otherwise its retry runs the handler at once; a commit held in the network
// and applied after the settle commits nothing. Never an in-progress answer
// for the length of a lease, never a write applied twice.
func TestAnUnknownCommitOutcomeIsSettledByTheFence(t *testing.T) {
	for _, withStep := range []bool{false, true} {
		for _, tc := range []struct {
			name      string
			fault     txFault
			firstOK   bool // the first caller gets the handler's response
			retryRuns bool // the retry runs the handler (else it replays)
		}{
			{"NeverReachedTheDatabase", txNotReached, false, true},
			{"CommittedAnswerLost", txCommitted, true, false},
			{"HeldAndAppliedAfterTheSettle", txHeld, false, true},
		} {
			t.Run(fmt.Sprintf("%s/steps=%v", tc.name, withStep), func(t *testing.T) {
				store := newTxFake()
				store.commitFault = tc.fault
				eng := idempotent.New(store, idempotent.WithMaxLease(10*time.Minute))
				runs, stepRuns := 0, 0
				h := idempotent.Wrap(eng, func(ctx context.Context, o txOrder) (string, error) {
					runs++
					if withStep {
						if _, err := idempotent.Step(ctx, "charge", func(context.Context) (int, error) { stepRuns++; return 1, nil }); err != nil {
							return "", err
						}
					}
					return fmt.Sprintf("ok %d", runs), addWrite(ctx, "ledger")
				}, idempotent.WithKey(txOrderKey))

				out, err := h(t.Context(), txOrder{ID: "o1"})
				if tc.firstOK {
					require.NoError(t, err, "the commit landed: the caller gets its response")
					assert.Equal(t, "ok 1", out)
				} else {
					require.ErrorIs(t, err, idempotent.ErrStore)
					require.ErrorIs(t, err, errConnReset)
					assert.Contains(t, err.Error(), "settled: nothing committed")
				}
				for _, herr := range store.applyHeld() {
					require.ErrorIs(t, herr, storage.ErrLeaseLost, "a commit applied after the settle finds the fence broken")
				}

				store.mu.Lock()
				store.commitFault = txNoFault
				store.mu.Unlock()
				out, err = h(t.Context(), txOrder{ID: "o1"})
				require.NoError(t, err, "the retry replays or runs at once: never in progress for a lease")
				if tc.retryRuns {
					assert.Equal(t, "ok 2", out)
					assert.Equal(t, 2, runs)
				} else {
					assert.Equal(t, "ok 1", out, "a replay of what committed")
					assert.Equal(t, 1, runs)
				}
				assert.Equal(t, []string{"ledger"}, store.writes(), "the write applied exactly once")
				if withStep {
					assert.Equal(t, 1, stepRuns, "the step's side effect ran once: the settle kept it (Suspend)")
				}
			})
		}
	}
}

// TestAnUnsettledCommitIsLeftToItsLease: when the settling write fails too,
// nothing decides the outcome, so the record is left to its lease: no second
// run while the lease lives, and a takeover after it.
func TestAnUnsettledCommitIsLeftToItsLease(t *testing.T) {
	store := newTxFake()
	store.commitFault = txNotReached
	store.releaseErr = errors.New("store unreachable")
	clk := newClock()
	eng := idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second))
	runs := 0
	h := idempotent.Wrap(eng, func(ctx context.Context, o txOrder) (string, error) {
		runs++
		return "ok", addWrite(ctx, "ledger")
	}, idempotent.WithKey(txOrderKey))

	_, err := h(t.Context(), txOrder{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrStore)
	assert.Contains(t, err.Error(), "left to its lease")
	_, err = h(t.Context(), txOrder{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrInProgress, "the commit may have landed: no second run while the lease lives")
	assert.Equal(t, 1, runs)

	store.mu.Lock()
	store.commitFault, store.releaseErr = txNoFault, nil
	store.mu.Unlock()
	clk.Advance(time.Minute)
	_, err = h(t.Context(), txOrder{ID: "o1"})
	require.NoError(t, err, "nothing committed: the takeover runs again")
	assert.Equal(t, 2, runs)
	assert.Equal(t, []string{"ledger"}, store.writes())
}

func TestNoTransactionInsideAStepOrAfterTheHandlerReturned(t *testing.T) {
	store := newTxFake()
	var late context.Context
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o txOrder) (string, error) {
		_, err := idempotent.Step(ctx, "charge", func(ctx context.Context) (int, error) {
			return 0, addWrite(ctx, "inside the step")
		})
		require.ErrorIs(t, err, idempotent.ErrNoTx)
		late = ctx
		return "ok", nil
	}, idempotent.WithKey(txOrderKey))
	_, err := h(t.Context(), txOrder{ID: "o1"})
	require.NoError(t, err)
	require.ErrorIs(t, addWrite(late, "after"), idempotent.ErrNoTx)
	require.ErrorIs(t, addWrite(t.Context(), "outside"), idempotent.ErrNoTx)
	assert.Empty(t, store.writes())
}

func TestARunWithoutARecordCommitsItsWritesAlone(t *testing.T) {
	store := newTxFake()
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOptionalKey()), func(ctx context.Context, o txOrder) (string, error) {
		return "ok", addWrite(ctx, "ledger")
	}, idempotent.WithKey(func(txOrder) (string, error) { return "", nil }))
	_, err := h(t.Context(), txOrder{})
	require.NoError(t, err)
	assert.Equal(t, []string{"ledger"}, store.writes())

	store.commitErr = fmt.Errorf("%w: stock", storage.ErrTxAborted)
	_, err = h(t.Context(), txOrder{})
	require.ErrorIs(t, err, idempotent.ErrTxAborted, "no success for writes that did not commit")
}
