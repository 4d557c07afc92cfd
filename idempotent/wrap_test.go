package idempotent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/testlog"
)

// counter is a handler with a visible side effect: the number of runs.
type counter struct{ runs atomic.Int32 }

func (c *counter) handle(_ context.Context, o order) (receipt, error) {
	return receipt{OrderID: o.ID, Run: c.runs.Add(1)}, nil
}

func TestFirstRunThenReplay(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook)), c.handle, idempotent.WithKey(orderKey))

	first, err := h(context.Background(), order{ID: "o-1", Amount: 5})
	require.NoError(t, err)
	second, err := h(context.Background(), order{ID: "o-1", Amount: 5})
	require.NoError(t, err)

	assert.Equal(t, receipt{OrderID: "o-1", Run: 1}, first)
	assert.Equal(t, first, second, "a duplicate gets the stored response")
	assert.EqualValues(t, 1, c.runs.Load(), "the handler ran once")
	assert.Equal(t, []idempotent.Outcome{idempotent.OutcomeExecuted, idempotent.OutcomeReplayed}, got.list())
	assert.Equal(t, 3, store.calls(), "claim+complete, then one claim")
}

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     []idempotent.WrapOption[order]
		core     []idempotent.Option
		a, b     order
		wantRuns int32
		wantErr  error
	}{
		{name: "default key is the whole input: same input replays", a: order{ID: "x", Amount: 1}, b: order{ID: "x", Amount: 1}, wantRuns: 1},
		{name: "default key is the whole input: other input runs", a: order{ID: "x", Amount: 1}, b: order{ID: "x", Amount: 2}, wantRuns: 2},
		{name: "custom key ignores other fields", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey)}, a: order{ID: "x", Amount: 1}, b: order{ID: "x", Amount: 2}, wantRuns: 1},
		{name: "missing key fails closed", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey)}, a: order{}, b: order{}, wantRuns: 0, wantErr: idempotent.ErrMissingKey},
		{name: "optional key runs without idempotency", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey)}, core: []idempotent.Option{idempotent.WithOptionalKey()}, a: order{}, b: order{}, wantRuns: 2},
		{name: "key function error", opts: []idempotent.WrapOption[order]{idempotent.WithKey(func(order) (string, error) { return "", errors.New("no id") })}, wantErr: idempotent.ErrInvalidKey},
		{name: "key too long", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey)}, a: order{ID: strings.Repeat("k", 1024+1)}, wantErr: idempotent.ErrInvalidKey},
		{name: "key at the limit", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey)}, a: order{ID: strings.Repeat("k", 1024)}, b: order{ID: strings.Repeat("k", 1024)}, wantRuns: 1},
		{name: "key not UTF-8", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey)}, a: order{ID: "\xff\xfe"}, wantErr: idempotent.ErrInvalidKey},
		{name: "scope error", opts: []idempotent.WrapOption[order]{idempotent.WithKey(orderKey), idempotent.WithScope(func(context.Context, order) (string, error) { return "", errors.New("no principal") })}, a: order{ID: "x"}, wantErr: idempotent.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.wantErr != nil {
				tt.b = tt.a
			}
			store := newSpyStore()
			var c counter
			h := idempotent.Wrap(idempotent.New(store, tt.core...), c.handle, tt.opts...)
			_, errA := h(context.Background(), tt.a)
			_, errB := h(context.Background(), tt.b)
			if tt.wantErr != nil {
				assert.ErrorIs(t, errA, tt.wantErr)
				assert.ErrorIs(t, errB, tt.wantErr)
				assert.Zero(t, store.calls(), "a rejected key never reaches the store")
			} else {
				assert.NoError(t, errA)
				assert.NoError(t, errB)
			}
			assert.Equal(t, tt.wantRuns, c.runs.Load())
		})
	}
}

func TestKeysAreHashedAndUnambiguous(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	scope := func(_ context.Context, o order) (string, error) { return strings.SplitN(o.ID, "|", 2)[0], nil }
	key := func(o order) (string, error) { return strings.SplitN(o.ID, "|", 2)[1], nil }
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("pay")), c.handle, idempotent.WithScope(scope), idempotent.WithKey(key))

	_, err := h(context.Background(), order{ID: "a|bc"})
	require.NoError(t, err)
	id := store.claimed().ID
	_, err = h(context.Background(), order{ID: "ab|c"})
	require.NoError(t, err)

	assert.EqualValues(t, 2, c.runs.Load(), `("a","bc") and ("ab","c") are different keys`)
	assert.NotEqual(t, id, store.claimed().ID)
	assert.Regexp(t, `^pay#[0-9a-f]{64}$`, id, "prefix in clear, key material hashed")
	assert.NotContains(t, id, "bc")
}

func TestPayloadValidation(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook), idempotent.WithLocalCache(8)), c.handle, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(func(o order) (any, error) { return o.Amount, nil }))

	_, err := h(context.Background(), order{ID: "o", Amount: 10})
	require.NoError(t, err)
	// The cache holds the record now; both paths must check the fingerprint.
	for range 2 {
		out, err := h(context.Background(), order{ID: "o", Amount: 11})
		require.ErrorIs(t, err, idempotent.ErrPayloadMismatch)
		assert.Zero(t, out, "the other payload's response is never returned")
	}
	_, err = h(context.Background(), order{ID: "o", Amount: 10})
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.runs.Load())
	assert.Equal(t, idempotent.OutcomePayloadMismatch, got.list()[1])

	// Without the cache, the store's record is checked.
	fresh := idempotent.Wrap(idempotent.New(store), c.handle, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(func(o order) (any, error) { return o.Amount, nil }))
	_, err = fresh(context.Background(), order{ID: "o", Amount: 12})
	require.ErrorIs(t, err, idempotent.ErrPayloadMismatch)

	bad := idempotent.Wrap(idempotent.New(store), c.handle, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(func(order) (any, error) { return nil, errors.New("boom") }))
	_, err = bad(context.Background(), order{ID: "o2"})
	require.ErrorIs(t, err, idempotent.ErrInvalidPayload)
}

func TestPayloadMismatchWhileInProgress(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	release := make(chan struct{})
	started := make(chan struct{})
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o order) (receipt, error) {
		close(started)
		<-release
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(func(o order) (any, error) { return o, nil }))

	done := make(chan error)
	go func() { _, err := h(context.Background(), order{ID: "o", Amount: 1}); done <- err }()
	<-started
	_, err := h(context.Background(), order{ID: "o", Amount: 2})
	assert.ErrorIs(t, err, idempotent.ErrPayloadMismatch, "a different payload is a mismatch even while the first runs")
	_, err = h(context.Background(), order{ID: "o", Amount: 1})
	assert.ErrorIs(t, err, idempotent.ErrInProgress)
	close(release)
	require.NoError(t, <-done)
}

func TestHandlerErrorReleases(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	errDeclined := errors.New("card declined")
	var runs atomic.Int32
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook)), func(_ context.Context, o order) (receipt, error) {
		if runs.Add(1) == 1 {
			return receipt{}, errDeclined
		}
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey))

	_, err := h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, errDeclined, "the handler's error is returned unchanged")
	assert.Equal(t, 2, store.calls(), "claim + release")
	out, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.Equal(t, "o", out.OrderID)
	assert.EqualValues(t, 2, runs.Load(), "a retry after a failure runs again")
	assert.Equal(t, []idempotent.Outcome{idempotent.OutcomeHandlerError, idempotent.OutcomeExecuted}, got.list())
}

func TestHandlerPanicReleasesAndRepanics(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store), func(_ context.Context, o order) (receipt, error) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey))

	assert.PanicsWithValue(t, "boom", func() { _, _ = h(context.Background(), order{ID: "o"}) })
	assert.EqualValues(t, 1, store.releases.Load())
	_, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, runs.Load())
}

func TestInProgress(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	release := make(chan struct{})
	started := make(chan struct{})
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook)), func(_ context.Context, o order) (receipt, error) {
		close(started)
		<-release
		return receipt{OrderID: o.ID, Run: 1}, nil
	}, idempotent.WithKey(orderKey))

	// Another process (another wrapper over the same table).
	other := idempotent.Wrap(idempotent.New(store), func(_ context.Context, o order) (receipt, error) {
		return receipt{}, errors.New("never runs")
	}, idempotent.WithKey(orderKey))

	done := make(chan error)
	go func() { _, err := h(context.Background(), order{ID: "o"}); done <- err }()
	<-started
	before := store.calls()
	_, err := other(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress)
	assert.Equal(t, 1, store.calls()-before, "an in-progress duplicate costs one call")
	_, err = h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress)
	assert.Equal(t, 1, store.calls()-before, "in the owner's process it costs none (coalescing)")
	close(release)
	require.NoError(t, <-done)
}

func TestWaitInProgressThenReplay(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	handler := func(_ context.Context, o order) (receipt, error) {
		n := runs.Add(1)
		if n == 1 {
			close(started)
			<-release
		}
		return receipt{OrderID: o.ID, Run: n}, nil
	}
	opts := []idempotent.Option{idempotent.WithWaitInProgress(5 * time.Second)}
	h := idempotent.Wrap(idempotent.New(store, opts...), handler, idempotent.WithKey(orderKey))
	other := idempotent.Wrap(idempotent.New(store, opts...), handler, idempotent.WithKey(orderKey)) // another process: it polls the store

	first := make(chan receipt)
	go func() { r, _ := h(context.Background(), order{ID: "o"}); first <- r }()
	<-started
	second := make(chan receipt)
	go func() {
		r, err := other(context.Background(), order{ID: "o"})
		assert.NoError(t, err)
		second <- r
	}()
	// Let the waiter poll at least once, then finish the first invocation.
	require.Eventually(t, func() bool { return store.claims.Load() >= 3 }, 5*time.Second, time.Millisecond)
	close(release)
	r1, r2 := <-first, <-second
	assert.Equal(t, r1, r2, "the waiter replays the first response")
	assert.EqualValues(t, 1, runs.Load())
}

func TestWaitInProgressGivesUp(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	handler := func(_ context.Context, o order) (receipt, error) {
		close(started)
		<-release
		return receipt{}, nil
	}
	h := idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(orderKey))
	other := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(100*time.Millisecond)), handler, idempotent.WithKey(orderKey))
	go func() { _, _ = h(context.Background(), order{ID: "o"}) }()
	<-started
	_, err := other(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress)
	assert.EqualValues(t, 1+3, store.claims.Load(), "claims, polls at 50 ms and at 100 ms (the end of the wait), then gives up")
}

func TestLeaseTakeoverAndFencing(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	clk := newClock()
	var got outcomes
	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	var keys, downstream sync.Map
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second), idempotent.WithOutcomeHook(got.hook)), func(ctx context.Context, o order) (receipt, error) {
		n := runs.Add(1)
		inv, ok := idempotent.FromContext(ctx)
		require.True(t, ok)
		keys.Store(n, inv)
		downstream.Store(n, idempotent.DownstreamKey(ctx))
		if n == 1 {
			close(started)
			<-release // a paused owner
		}
		return receipt{OrderID: o.ID, Run: n}, nil
	}, idempotent.WithKey(orderKey))

	firstDone := make(chan receipt)
	go func() { r, _ := h(context.Background(), order{ID: "o"}); firstDone <- r }()
	<-started

	clk.Advance(10*time.Second + (2 * time.Second)) // at the lease end: still held
	_, err := h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress)

	clk.Advance(time.Millisecond) // past the lease: taken over
	second, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, second.Run)
	ev := got.last()
	assert.Equal(t, idempotent.OutcomeExecuted, ev.Outcome)
	assert.True(t, ev.TookOver)

	close(release) // the paused owner resumes: its completion is fenced
	first := <-firstDone
	assert.EqualValues(t, 1, first.Run, "the original caller keeps its response")
	assert.Equal(t, idempotent.OutcomeLeaseLost, got.last().Outcome)

	replay, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.Equal(t, second, replay, "the stored response is the new owner's")

	inv1, _ := keys.Load(int32(1))
	inv2, _ := keys.Load(int32(2))
	dk1, _ := downstream.Load(int32(1))
	dk2, _ := downstream.Load(int32(2))
	assert.NotEmpty(t, dk1)
	assert.Equal(t, dk1, dk2, "downstream key survives a takeover")
	assert.False(t, inv1.(idempotent.Invocation).TookOver)
	assert.True(t, inv2.(idempotent.Invocation).TookOver)
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	clk := newClock()
	var c counter
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithExpiry(10*time.Minute), idempotent.WithLocalCache(4)), c.handle, idempotent.WithKey(orderKey))

	_, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	clk.Advance(10 * time.Minute)
	r, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Run, "still replayed at the expiry second")
	clk.Advance(time.Second)
	r, err = h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Run, "an expired record is absent, in the store and in the cache")
}

func TestLeaseFollowsDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		timeout   time.Duration
		maxLease  time.Duration
		wantLease time.Duration // stored lease minus clock skew, approximately
	}{
		{name: "deadline shorter than max lease", timeout: 30 * time.Second, maxLease: time.Minute, wantLease: 30 * time.Second},
		{name: "max lease shorter than deadline", timeout: time.Minute, maxLease: 10 * time.Second, wantLease: 10 * time.Second},
		{name: "no deadline uses the max lease", maxLease: 20 * time.Second, wantLease: 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newSpyStore()
			clk := newClock()
			var handlerDeadline time.Duration
			h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(tt.maxLease)), func(ctx context.Context, o order) (receipt, error) {
				dl, ok := ctx.Deadline()
				require.True(t, ok, "the handler always runs under a deadline")
				handlerDeadline = time.Until(dl)
				return receipt{}, nil
			}, idempotent.WithKey(orderKey))
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			_, err := h(ctx, order{ID: "o"})
			require.NoError(t, err)
			rec := store.claimed()
			lease := rec.LeaseExpiresAt.Sub(clk.Now()) - (2 * time.Second)
			assert.InDelta(t, tt.wantLease.Seconds(), lease.Seconds(), 0.5)
			assert.Less(t, handlerDeadline, lease, "the handler stops before its lease ends")
			assert.Greater(t, handlerDeadline, lease-2*time.Second) // the reserve is at most 1 s
			assert.False(t, rec.ExpiresAt.Before(rec.LeaseExpiresAt), "an INPROGRESS record never expires before its lease")
		})
	}
}

func TestNoTimeLeft(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	h := idempotent.Wrap(idempotent.New(store), c.handle, idempotent.WithKey(orderKey))

	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	_, err := h(expired, order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrStore)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = h(cancelled, order{ID: "o"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, c.runs.Load(), "the handler never runs without time to finish")
	assert.Zero(t, store.calls())
}

func TestClaimFailureDoesNotRun(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	throttled := errors.New("ProvisionedThroughputExceededException")
	store.claimErr = throttled
	var c counter
	h := idempotent.Wrap(idempotent.New(store), c.handle, idempotent.WithKey(orderKey))
	_, err := h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrStore)
	require.ErrorIs(t, err, throttled, "the cause stays inspectable")
	assert.Zero(t, c.runs.Load())
	assert.EqualValues(t, 1, store.releases.Load(), "a claim of unknown outcome is released, fenced by its lease")
}

func TestCompletionFailureKeepsResponse(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	store.completeFn = func(storage.Record) error { return errors.New("service unavailable") }
	var c counter
	var got outcomes
	var logs bytes.Buffer
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook), idempotent.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))), c.handle, idempotent.WithKey(orderKey))

	out, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err, "the original caller keeps its response")
	assert.EqualValues(t, 1, out.Run)
	ev := got.last()
	assert.Equal(t, idempotent.OutcomeStoreError, ev.Outcome)
	assert.True(t, ev.HandlerRan)
	assert.Contains(t, logs.String(), `"level":"ERROR"`)
	assert.Contains(t, logs.String(), `"outcome":"store_error"`)

	_, err = h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress, "the record is left to its lease")
}

func TestCompletionSurvivesCancelledContext(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	ctx, cancel := context.WithCancel(context.Background())
	h := idempotent.Wrap(idempotent.New(store), func(_ context.Context, o order) (receipt, error) {
		cancel() // the invocation's context ends while the handler finishes
		return receipt{OrderID: o.ID, Run: 1}, nil
	}, idempotent.WithKey(orderKey))
	_, err := h(ctx, order{ID: "o"})
	require.NoError(t, err)
	r, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Run, "completed despite the cancelled context")
}

func TestReleaseFailureLeavesLease(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	clk := newClock()
	store.releaseErr = errors.New("timeout")
	var runs atomic.Int32
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(5*time.Second), idempotent.WithOutcomeHook(got.hook)), func(_ context.Context, o order) (receipt, error) {
		if runs.Add(1) == 1 {
			return receipt{}, errors.New("downstream failed")
		}
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey))

	_, err := h(context.Background(), order{ID: "o"})
	require.Error(t, err)
	assert.Equal(t, idempotent.OutcomeStoreError, got.last().Outcome)
	_, err = h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress)
	clk.Advance(5*time.Second + (2 * time.Second) + time.Millisecond)
	_, err = h(context.Background(), order{ID: "o"})
	require.NoError(t, err, "after the lease a retry takes over")
	assert.True(t, got.last().TookOver)
}

type blob struct {
	Body []byte `json:"body"`
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func TestLargeResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       []byte
		wantStored bool
	}{
		{name: "100 KB random", body: randomBytes(100 << 10), wantStored: true},
		{name: "350 KB compressible", body: bytes.Repeat([]byte("0123456789abcdef"), 350<<10/16), wantStored: true},
		{name: "1 MB compressible", body: bytes.Repeat([]byte(`{"sku":"A-1","qty":1},`), 1<<20/22), wantStored: true},
		{name: "350 KB random, compressed under the limit", body: randomBytes(350 << 10), wantStored: true}, // base64 ~467 KB, deflated ~350 KB
		{name: "450 KB random", body: randomBytes(450 << 10), wantStored: false},
		{name: "1 MB random", body: randomBytes(1 << 20), wantStored: false},
		{name: "10 MB random", body: randomBytes(10 << 20), wantStored: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newSpyStore()
			var runs atomic.Int32
			var got outcomes
			h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook)), func(_ context.Context, _ order) (blob, error) {
				runs.Add(1)
				return blob{Body: tt.body}, nil
			}, idempotent.WithKey(orderKey))

			first, err := h(context.Background(), order{ID: "o"})
			require.NoError(t, err)
			assert.True(t, bytes.Equal(tt.body, first.Body), "the original caller always gets its response")
			again, err := h(context.Background(), order{ID: "o"})
			assert.EqualValues(t, 1, runs.Load(), "never run twice")
			if tt.wantStored {
				require.NoError(t, err)
				assert.True(t, bytes.Equal(tt.body, again.Body), "replayed byte for byte")
				assert.Equal(t, []idempotent.Outcome{idempotent.OutcomeExecuted, idempotent.OutcomeReplayed}, got.list())
			} else {
				require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
				assert.Equal(t, []idempotent.Outcome{idempotent.OutcomeNotStored, idempotent.OutcomeResponseNotStored}, got.list())
			}
		})
	}
}

// unmarshalable is a response encoding/json fails to encode. (A type it can
// never encode, such as one with a chan field, is refused by Wrap instead:
// see TestWrapRefusesTypesJSONCannotReplay.)
type unmarshalable struct{}

func (unmarshalable) MarshalJSON() ([]byte, error) { return nil, errors.New("test: cannot encode") }

func TestUnserializableResponse(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store), func(context.Context, order) (unmarshalable, error) {
		runs.Add(1)
		return unmarshalable{}, nil
	}, idempotent.WithKey(orderKey))
	_, err := h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
	_, err = h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrResponseNotStored, "a retry does not repeat the side effect")
	assert.EqualValues(t, 1, runs.Load())
}

func TestLocalCache(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithLocalCache(16), idempotent.WithOutcomeHook(got.hook)), c.handle, idempotent.WithKey(orderKey))
	first, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	calls := store.calls()
	for range 3 {
		r, err := h(context.Background(), order{ID: "o"})
		require.NoError(t, err)
		assert.Equal(t, first, r)
	}
	assert.Equal(t, calls, store.calls(), "cache hits cost no store call")
	assert.True(t, got.last().FromCache)
}

func TestLocalCacheNeverHoldsInProgress(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	release := make(chan struct{})
	started := make(chan struct{})
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithLocalCache(16)), func(_ context.Context, o order) (receipt, error) {
		close(started)
		<-release
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey))
	done := make(chan struct{})
	go func() { _, _ = h(context.Background(), order{ID: "o"}); close(done) }()
	<-started
	for range 2 {
		_, err := h(context.Background(), order{ID: "o"})
		require.ErrorIs(t, err, idempotent.ErrInProgress, "each attempt asks the store")
	}
	close(release)
	<-done
}

// markedReceipt learns it is a replay (idempotent.ReplayMarker).
type markedReceipt struct {
	receipt
	Marks []idempotent.Replay `json:"-"`
}

func (r *markedReceipt) MarkReplayed(info idempotent.Replay) {
	r.Marks = append(r.Marks, info)
	r.OrderID += " (replayed)"
}

func TestReplayMarker(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o order) (markedReceipt, error) {
		r, err := c.handle(ctx, o)
		return markedReceipt{receipt: r}, err
	}, idempotent.WithKey(orderKey))
	first, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.Equal(t, "o", first.OrderID, "a first run is not marked")
	assert.Empty(t, first.Marks)
	r, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.Equal(t, "o (replayed)", r.OrderID)
	require.Len(t, r.Marks, 1)
	assert.Regexp(t, `#[0-9a-f]{64}$`, r.Marks[0].RecordID)
	assert.False(t, r.Marks[0].ExpiresAt.IsZero())
}

func TestDisabled(t *testing.T) {
	t.Setenv("IDEMKIT_DISABLED", "true")
	store := newSpyStore()
	var c counter
	var logs bytes.Buffer
	var o outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(o.hook), idempotent.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))), c.handle, idempotent.WithKey(orderKey))
	for range 3 {
		_, err := h(context.Background(), order{ID: "o"})
		require.NoError(t, err)
	}
	assert.EqualValues(t, 3, c.runs.Load())
	assert.Zero(t, store.calls())
	assert.Equal(t, []idempotent.Outcome{idempotent.OutcomeBypassed, idempotent.OutcomeBypassed, idempotent.OutcomeBypassed}, o.list(),
		"one outcome per invocation, as always")
	assert.Equal(t, 1, strings.Count(logs.String(), "IDEMKIT_DISABLED"), "one warning per cold start")
}

func TestCorruptRecords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*storage.Record)
	}{
		{name: "foreign version", mutate: func(r *storage.Record) { r.Version = 0 }},
		{name: "future version", mutate: func(r *storage.Record) { r.Version = storage.RecordVersion + 1 }},
		{name: "unknown status", mutate: func(r *storage.Record) { r.Status = "DONE" }},
		{name: "completed without data", mutate: func(r *storage.Record) { r.Status = storage.StatusCompleted; r.Data = nil }},
		{name: "unknown data encoding", mutate: func(r *storage.Record) { r.Status = storage.StatusCompleted; r.Data = []byte("?garbage") }},
		{name: "bad compressed data", mutate: func(r *storage.Record) { r.Status = storage.StatusCompleted; r.Data = []byte("z\x00\x01") }},
		{name: "response of another type", mutate: func(r *storage.Record) {
			r.Status = storage.StatusCompleted
			r.Data = []byte(`p["not","a","receipt"]`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c counter
			store := &refusingStore{StepStore: idempotent.NewMemoryStore(), mutate: tt.mutate}
			h := idempotent.Wrap(idempotent.New(store), c.handle, idempotent.WithKey(orderKey))
			out, err := h(context.Background(), order{ID: "o"})
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			assert.Zero(t, out, "garbage is never replayed")
			assert.Zero(t, c.runs.Load())
		})
	}
}

// refusingStore refuses every claim with the claimed record, mutated.
type refusingStore struct {
	storage.StepStore
	mutate func(*storage.Record)
}

func (s *refusingStore) Claim(_ context.Context, rec storage.Record, _ time.Time) (storage.ClaimResult, error) {
	s.mutate(&rec)
	return storage.ClaimResult{Existing: &rec}, nil
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var c counter
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(5*time.Second)), c.handle, idempotent.WithKey(orderKey))
	const n = 64
	var wg sync.WaitGroup
	results := make([]receipt, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h(context.Background(), order{ID: "same"})
			assert.NoError(t, err)
			results[i] = r
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, c.runs.Load())
	for _, r := range results {
		assert.Equal(t, results[0], r)
	}
}

func TestLogsNeverCarryKeysOrPayloads(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var logs bytes.Buffer
	logger := testlog.Logger(&logs)
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithLogger(logger)), func(_ context.Context, o order) (receipt, error) {
		if o.Amount < 0 {
			return receipt{}, errors.New("negative")
		}
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(func(o order) (any, error) { return o, nil }))
	secret := "secret-key-4242"
	for _, o := range []order{{ID: secret, Amount: 987654321}, {ID: secret, Amount: 987654321}, {ID: secret, Amount: 987654322}, {ID: secret + "x", Amount: -1}} {
		_, _ = h(context.Background(), o)
	}
	require.NotEmpty(t, logs.String())
	assert.NotContains(t, logs.String(), secret)
	assert.NotContains(t, logs.String(), "987654321")
	for _, want := range []string{"executed", "replayed", "payload_mismatch", "handler_error"} {
		assert.Contains(t, logs.String(), `"outcome":"`+want+`"`)
	}
}

func TestWrapPanicsOnProgrammerErrors(t *testing.T) {
	t.Parallel()
	var c counter
	store := idempotent.NewMemoryStore()
	var nilStore *refusingStore // a nil pointer in a non-nil interface
	assert.PanicsWithValue(t, "idempotent: New: nil store", func() { idempotent.Wrap(idempotent.New(nilStore), c.handle) })
	assert.Panics(t, func() { idempotent.Wrap(idempotent.New(nil), c.handle) })
	assert.PanicsWithValue(t, "idempotent: Wrap: nil Engine", func() { idempotent.Wrap(nil, c.handle) })
	assert.Panics(t, func() { idempotent.Wrap[order, receipt](idempotent.New(store), nil) })
	assert.Panics(t, func() { idempotent.Wrap(idempotent.New(store), c.handle, idempotent.WithKey[order](nil)) })
	assert.Panics(t, func() { idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("")), c.handle) })
}

func TestOutcomeNames(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for o := idempotent.OutcomeExecuted; o <= idempotent.OutcomeBypassed; o++ {
		name := o.String()
		assert.NotEqual(t, "unknown", name)
		assert.False(t, seen[name], "duplicate name %q", name)
		seen[name] = true
	}
	assert.Equal(t, "unknown", idempotent.Outcome(0).String())
}

func TestResponseRoundTripsThroughJSON(t *testing.T) {
	t.Parallel()
	type big struct {
		Amount json.Number `json:"amount"`
		Tags   []string    `json:"tags"`
	}
	store := newSpyStore()
	h := idempotent.Wrap(idempotent.New(store), func(context.Context, order) (big, error) {
		return big{Amount: "12345678901234567891", Tags: []string{"a"}}, nil
	}, idempotent.WithKey(orderKey))
	a, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	b, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestTheHandlersContextEndsBeforeItsLeaseWithACause(t *testing.T) {
	var err, cause error
	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithMaxLease(200*time.Millisecond)), func(ctx context.Context, o stepOrder) (string, error) {
		<-ctx.Done()
		err, cause = ctx.Err(), context.Cause(ctx)
		return "", ctx.Err()
	}, idempotent.WithKey(stepOrderKey))
	_, herr := h(context.Background(), stepOrder{Key: "k"})
	require.ErrorIs(t, herr, context.DeadlineExceeded)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, cause, context.DeadlineExceeded)
	assert.Contains(t, cause.Error(), "lease", "the cause says why the handler's time is up")
}

func TestTypedOptionsOfAnotherTypeDoNotCompile(t *testing.T) {
	// What used to panic at start-up must now fail to compile: a key or
	// scope function whose input is not the handler's.
	if testing.Short() {
		t.Skip("builds programs with the go command")
	}
	for _, prog := range []string{"key", "scope"} {
		t.Run(prog, func(t *testing.T) {
			out, err := exec.Command("go", "build", "-o", os.DevNull, "./testdata/mismatch/"+prog).CombinedOutput()
			require.Error(t, err, "a mismatched %s function compiled", prog)
			assert.Contains(t, string(out), "does not match", "it fails for the mismatch, not for anything else: %s", out)
		})
	}
}
