package idempotent_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// gate holds the first run of a handler until every duplicate waits on it.
type gate struct {
	started, release chan struct{}
	following        atomic.Int32
}

func newGate() *gate { return &gate{started: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) follow() { g.following.Add(1) }

// duplicates runs n calls of h for the same key at once, the first alone
// until it runs, and returns each call's response and error in call order.
// With wait, the duplicates wait on the first (WithWaitInProgress);
// without, each is answered while the first runs.
func duplicates(t *testing.T, g *gate, n int, wait bool, h func(context.Context, order) (receipt, error), in func(i int) order) ([]receipt, []error) {
	t.Helper()
	outs, errs := make([]receipt, n), make([]error, n)
	var wg sync.WaitGroup
	var answered atomic.Int32
	call := func(i int) {
		defer wg.Done()
		outs[i], errs[i] = h(context.Background(), in(i))
		answered.Add(1)
	}
	wg.Add(n)
	go call(0)
	<-g.started
	for i := 1; i < n; i++ {
		go call(i)
	}
	if wait {
		require.Eventually(t, func() bool { return g.following.Load() == int32(n-1) }, 5*time.Second, time.Millisecond,
			"every duplicate waits on the first")
	} else {
		require.Eventually(t, func() bool { return answered.Load() == int32(n-1) }, 5*time.Second, time.Millisecond,
			"every duplicate is answered while the first runs")
	}
	close(g.release)
	wg.Wait()
	return outs, errs
}

func TestCoalescing(t *testing.T) {
	t.Parallel()
	const n = 16
	same := func(int) order { return order{ID: "o", Amount: 100} }
	tests := []struct {
		name        string
		wait        bool
		wantShared  int
		wantInProgr int
	}{
		{name: "waiting duplicates share the response", wait: true, wantShared: n - 1},
		{name: "without waiting, ErrInProgress with no store call", wantInProgr: n - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newSpyStore()
			g := newGate()
			var runs atomic.Int32
			var got outcomes
			opts := []idempotent.Option{idempotent.WithOutcomeHook(got.hook), idempotent.WithFollowHook(g.follow)}
			if tt.wait {
				opts = append(opts, idempotent.WithWaitInProgress(time.Minute))
			}
			h := idempotent.Wrap(idempotent.New(store, opts...), func(_ context.Context, o order) (receipt, error) {
				if runs.Add(1) == 1 {
					close(g.started)
					<-g.release
				}
				return receipt{OrderID: o.ID, Run: 7}, nil
			}, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(amount))

			outs, errs := duplicates(t, g, n, tt.wait, h, same)
			assert.EqualValues(t, 1, runs.Load(), "one run for all")
			assert.Equal(t, 2, store.calls(), "claim and completion, for all %d calls", n)
			require.NoError(t, errs[0])
			shared, inProgress := 0, 0
			for i := 1; i < n; i++ {
				switch {
				case errs[i] == nil:
					assert.Equal(t, outs[0], outs[i], "a shared response equals the first")
					shared++
				case errors.Is(errs[i], idempotent.ErrInProgress):
					inProgress++
				default:
					t.Errorf("call %d: %v", i, errs[i])
				}
			}
			assert.Equal(t, tt.wantShared, shared)
			assert.Equal(t, tt.wantInProgr, inProgress)
			sharedEvents := 0
			for _, ev := range got.events {
				if ev.Shared {
					assert.Equal(t, idempotent.OutcomeReplayed, ev.Outcome)
					sharedEvents++
				}
			}
			assert.Equal(t, tt.wantShared, sharedEvents, "each shared replay is reported as one")
		})
	}
}

func TestCoalescingNeverSharesAnError(t *testing.T) {
	t.Parallel()
	const n = 5
	store := newSpyStore()
	g := newGate()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(time.Minute), idempotent.WithFollowHook(g.follow)), func(_ context.Context, o order) (receipt, error) {
		switch runs.Add(1) {
		case 1:
			close(g.started)
			<-g.release
			return receipt{}, errors.New("card declined")
		default:
			return receipt{OrderID: o.ID, Run: 2}, nil
		}
	}, idempotent.WithKey(orderKey))

	outs, errs := duplicates(t, g, n, true, h, func(int) order { return order{ID: "o"} })
	require.EqualError(t, errs[0], "card declined", "the leader gets its own error")
	assert.EqualValues(t, 2, runs.Load(), "after the failure one duplicate runs, the others share its response")
	for i := 1; i < n; i++ {
		require.NoError(t, errs[i], "call %d", i)
		assert.EqualValues(t, 2, outs[i].Run)
	}
	// Claim and release, claim and completion; a waiter that meets no
	// flight after the second landed replays from the store (one call), but
	// none polled it while waiting.
	assert.GreaterOrEqual(t, store.calls(), 4)
	assert.LessOrEqual(t, store.calls(), 4+(n-2))
}

func TestCoalescingRespectsPayloadAndScope(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	g := newGate()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(time.Minute)), func(_ context.Context, o order) (receipt, error) {
		if runs.Add(1) == 1 {
			close(g.started)
			<-g.release
		}
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(amount), idempotent.WithScope(func(_ context.Context, o order) (string, error) {
		if o.Amount == 3 {
			return "tenant-b", nil
		}
		return "tenant-a", nil
	}))
	done := make(chan error, 1)
	go func() { _, err := h(context.Background(), order{ID: "o", Amount: 1}); done <- err }()
	<-g.started
	before := store.calls()
	_, err := h(context.Background(), order{ID: "o", Amount: 2})
	require.ErrorIs(t, err, idempotent.ErrPayloadMismatch, "another payload never shares the flight")
	assert.Equal(t, before, store.calls(), "and costs no store call")
	_, err = h(context.Background(), order{ID: "o", Amount: 3})
	require.NoError(t, err, "another scope is another record: it runs")
	assert.EqualValues(t, 2, runs.Load())
	close(g.release)
	require.NoError(t, <-done)
}

// TestNoGoroutineLeaks: making wrappers starts no goroutine (the local cache
// is a plain LRU: each record's own expiry is checked on every hit), and a
// finished call leaves none behind, coalesced or not.
func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	store := idempotent.NewMemoryStore()
	var c counter
	for range 500 {
		h := idempotent.Wrap(idempotent.New(store, idempotent.WithLocalCache(64), idempotent.WithWaitInProgress(time.Second)), c.handle, idempotent.WithKey(orderKey))
		_, err := h(context.Background(), order{ID: "o"})
		require.NoError(t, err)
	}
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond) // timers and finished calls wind down
	}
	assert.LessOrEqual(t, after, before, "goroutines after making 500 wrappers")
}

// TestCoalescingPastALapsedLeaseGoesToTheStore: once the call that holds a
// record overran its lease, a duplicate in its process goes to the store,
// whatever its payload; here the record has expired, so it runs (found by
// internal/modelcheck: it used to get ErrPayloadMismatch from memory for as
// long as the hung call lived).
func TestCoalescingPastALapsedLeaseGoesToTheStore(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	clk := newClock()
	b := newBlocker()
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(time.Second), idempotent.WithExpiry(time.Second)), b.handle, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(amount))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = h(context.Background(), order{ID: "o", Amount: 1}) }()
	<-b.started
	defer func() { close(b.release); <-done }()

	before := store.claims.Load()
	_, err := h(context.Background(), order{ID: "o", Amount: 2})
	require.ErrorIs(t, err, idempotent.ErrPayloadMismatch, "while the lease lives, from memory")
	assert.Equal(t, before, store.claims.Load())

	clk.Advance(time.Minute) // past the lease and the record's expiry
	r, err := h(context.Background(), order{ID: "o", Amount: 2})
	require.NoError(t, err, "the store lets the other payload run: the record expired")
	assert.EqualValues(t, 2, r.Run)
	assert.Equal(t, before+1, store.claims.Load())
}

// TestFollowerThatLeadsClaimsFromNow: a duplicate that waited on a leader
// that failed, and then claims itself, takes its lease from the clock as it
// claims, not from when it was called: a lease counted from a stale reading
// could end while its handler still runs.
func TestFollowerThatLeadsClaimsFromNow(t *testing.T) {
	t.Parallel()
	const waited = time.Hour
	store := newSpyStore()
	clk := newClock()
	g := newGate()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(time.Minute), idempotent.WithFollowHook(g.follow), idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second)), func(_ context.Context, o order) (receipt, error) {
		if runs.Add(1) == 1 {
			close(g.started)
			<-g.release
			clk.Advance(waited) // while the duplicate waits
			return receipt{}, errors.New("card declined")
		}
		return receipt{OrderID: o.ID, Run: 2}, nil
	}, idempotent.WithKey(orderKey))

	outs, errs := duplicates(t, g, 2, true, h, func(int) order { return order{ID: "o"} })
	require.EqualError(t, errs[0], "card declined")
	require.NoError(t, errs[1])
	assert.EqualValues(t, 2, outs[1].Run, "the duplicate ran after the leader failed")
	rec := store.claimed()
	assert.True(t, rec.LeaseExpiresAt.After(clk.Now()), "lease ends %v, after the claim at %v", rec.LeaseExpiresAt, clk.Now())
}
