package idempotent_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// quiet keeps the expected error logs of these tests out of the output.
var quiet = idempotent.WithLogger(slog.New(slog.DiscardHandler))

// panicsOnMarshal is a response whose MarshalJSON panics (encoding/json
// passes the panic on).
type panicsOnMarshal struct{}

func (panicsOnMarshal) MarshalJSON() ([]byte, error) { panic("boom in MarshalJSON") }

// panicsOnUnmarshal encodes fine and panics when a replay decodes it.
type panicsOnUnmarshal struct {
	V int `json:"v"`
}

func (*panicsOnUnmarshal) UnmarshalJSON([]byte) error { panic("boom in UnmarshalJSON") }

// A codec that panics after the handler ran must not leave the record
// INPROGRESS: a takeover after the lease would run the side effect again.
func TestCodecPanicCompletesWithoutTheResponse(t *testing.T) {
	store := newSpyStore()
	clk := newClock()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(time.Minute), quiet), func(context.Context, order) (panicsOnMarshal, error) {
		runs.Add(1)
		return panicsOnMarshal{}, nil
	}, idempotent.WithKey(orderKey))

	var err error
	require.NotPanics(t, func() { _, err = h(context.Background(), order{ID: "o1"}) })
	require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
	assert.ErrorContains(t, err, "boom in MarshalJSON")
	assert.Equal(t, int32(1), store.completes.Load(), "completed, without the response")
	assert.Zero(t, store.releases.Load(), "not released: a retry would repeat the side effect")

	clk.Advance(2 * time.Minute) // past the lease: an INPROGRESS record would now be taken over
	for range 2 {
		_, err = h(context.Background(), order{ID: "o1"})
		require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
	}
	assert.Equal(t, int32(1), runs.Load())
}

func TestCodecPanicOnReplayIsAnError(t *testing.T) {
	var o outcomes
	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(o.hook), quiet), func(context.Context, order) (*panicsOnUnmarshal, error) {
		return &panicsOnUnmarshal{V: 1}, nil
	}, idempotent.WithKey(orderKey))
	out, err := h(context.Background(), order{ID: "o1"})
	require.NoError(t, err)
	require.Equal(t, 1, out.V)

	require.NotPanics(t, func() { _, err = h(context.Background(), order{ID: "o1"}) })
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.ErrorContains(t, err, "boom in UnmarshalJSON")
	assert.Equal(t, idempotent.OutcomeRejected, o.last().Outcome)
}

// slowClaimStore answers claims late, as SDK retries of a throttled PutItem
// do. Its delay stands for a store's latency: nothing waits for a lease.
type slowClaimStore struct {
	*spyStore
	delay time.Duration
}

func (s *slowClaimStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	res, err := s.spyStore.Claim(ctx, rec, now)
	time.Sleep(s.delay)
	return res, err
}

// The handler's deadline is measured from before the claim, as the lease
// is: however long the claim takes, the handler stops a full reserve before
// the lease ends, so no live owner ever holds a lapsed lease.
func TestSlowClaimShortensTheHandlersTime(t *testing.T) {
	const maxLease = 2 * time.Second // reserve: a quarter, 500 ms
	for _, delay := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			store := &slowClaimStore{spyStore: newSpyStore(), delay: delay}
			var deadline time.Time
			h := idempotent.Wrap(idempotent.New(store, idempotent.WithMaxLease(maxLease), idempotent.WithClockSkew(0)), func(ctx context.Context, _ order) (receipt, error) {
				deadline, _ = ctx.Deadline()
				return receipt{}, nil
			}, idempotent.WithKey(orderKey))
			_, err := h(context.Background(), order{ID: "o1"})
			require.NoError(t, err)
			require.False(t, deadline.IsZero())
			leaseEnd := store.claimed().LeaseExpiresAt // kept to the millisecond
			assert.GreaterOrEqual(t, leaseEnd.Sub(deadline), maxLease/4-time.Millisecond,
				"the handler must stop a reserve before its lease ends")
		})
	}
}

// A claim that used up the whole budget gives the key back without running
// the handler: it could only run past its lease.
func TestClaimThatTakesTheWholeLeaseDoesNotRun(t *testing.T) {
	store := &slowClaimStore{spyStore: newSpyStore(), delay: 80 * time.Millisecond}
	var o outcomes
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClockSkew(0), idempotent.WithOutcomeHook(o.hook), quiet), func(context.Context, order) (receipt, error) {
		runs.Add(1)
		return receipt{}, nil
	}, idempotent.WithKey(orderKey))
	// 100 ms left in the invocation: the lease is 100 ms, the handler's time 75 ms.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := h(ctx, order{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrStore)
	assert.Zero(t, runs.Load())
	assert.Equal(t, idempotent.OutcomeStoreError, o.last().Outcome)
	assert.False(t, o.last().HandlerRan)
	assert.Equal(t, int32(1), store.releases.Load(), "the claim is given back")

	store.delay = 0
	_, err = h(context.Background(), order{ID: "o1"})
	require.NoError(t, err, "the key is free again")
	assert.Equal(t, int32(1), runs.Load())
}

// A panic value that is an error stays matchable in the outcome event.
func TestHandlerPanicWithAnErrorIsMatchable(t *testing.T) {
	sentinel := errors.New("sentinel")
	for name, value := range map[string]any{"error": sentinel, "string": "not an error"} {
		t.Run(name, func(t *testing.T) {
			var o outcomes
			h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(o.hook), quiet), func(context.Context, order) (receipt, error) {
				panic(value)
			}, idempotent.WithKey(orderKey))
			require.PanicsWithValue(t, value, func() { _, _ = h(context.Background(), order{ID: "o1"}) })
			ev := o.last()
			assert.Equal(t, idempotent.OutcomeHandlerError, ev.Outcome)
			assert.ErrorContains(t, ev.Err, "handler panicked")
			assert.Equal(t, name == "error", errors.Is(ev.Err, sentinel))
		})
	}
}

// runtime.Goexit in a handler (t.FailNow in a test, say) skips the normal
// return: the record is still given back.
func TestHandlerGoexitReleasesTheRecord(t *testing.T) {
	store := newSpyStore()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, quiet), func(context.Context, order) (receipt, error) {
		if runs.Add(1) == 1 {
			runtime.Goexit()
		}
		return receipt{Run: runs.Load()}, nil
	}, idempotent.WithKey(orderKey))

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h(context.Background(), order{ID: "o1"})
	}()
	<-done
	assert.Equal(t, int32(1), store.releases.Load())

	out, err := h(context.Background(), order{ID: "o1"})
	require.NoError(t, err, "not stuck in progress")
	assert.Equal(t, int32(2), out.Run)
}

// A claim that outlasted the invocation itself: the handler does not run
// either (its context would be born expired, its lease already over).
func TestClaimPastTheInvocationsDeadlineDoesNotRun(t *testing.T) {
	store := &slowClaimStore{spyStore: newSpyStore(), delay: 150 * time.Millisecond}
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClockSkew(0), quiet), func(context.Context, order) (receipt, error) {
		runs.Add(1)
		return receipt{}, nil
	}, idempotent.WithKey(orderKey))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := h(ctx, order{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrStore)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, runs.Load())
	assert.Equal(t, int32(1), store.releases.Load(), "the claim is given back")
}
