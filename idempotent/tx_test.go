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
	defer t.s.mu.Unlock()
	if t.s.commitErr != nil {
		return t.s.commitErr
	}
	if rec.ID != "" {
		if err := t.s.StepStore.Complete(ctx, rec); err != nil {
			return err // the fence failed: nothing of this run is applied
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.committed = append(t.s.committed, t.pending...)
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

func TestAnUnknownCommitOutcomeLeavesTheRecordToItsLease(t *testing.T) {
	store := newTxFake()
	store.commitErr = errors.New("connection reset")
	clk := newClock()
	eng := idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second))
	runs := 0
	h := idempotent.Wrap(eng, func(ctx context.Context, o txOrder) (string, error) {
		runs++
		return "ok", addWrite(ctx, "ledger")
	}, idempotent.WithKey(txOrderKey))

	_, err := h(t.Context(), txOrder{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrStore)
	_, err = h(t.Context(), txOrder{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrInProgress, "the commit may have landed: no second run while the lease lives")
	assert.Equal(t, 1, runs)

	store.mu.Lock()
	store.commitErr = nil
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
