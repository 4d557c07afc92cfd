package idempotent_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// Regression tests for the protocol's edges: payload-bound takeovers,
// saturating durations, exact waits and the prefix limit. The conformance
// suite (storetest) and internal/modelcheck check the same rules on every
// store.

// blocker is a handler whose first run blocks until released; it reports
// each run's payload.
type blocker struct {
	started chan struct{}
	release chan struct{}
	runs    atomic.Int32
	mu      sync.Mutex
	amounts []int64
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}), release: make(chan struct{})}
}

func (b *blocker) handle(_ context.Context, o order) (receipt, error) {
	n := b.runs.Add(1)
	b.mu.Lock()
	b.amounts = append(b.amounts, o.Amount)
	b.mu.Unlock()
	if n == 1 {
		close(b.started)
		<-b.release
	}
	return receipt{OrderID: o.ID, Run: n}, nil
}

func amount(o order) (any, error) { return o.Amount, nil }

func TestTakeoverIsBoundToThePayload(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	clk := newClock()
	b := newBlocker()
	var got outcomes
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second), idempotent.WithOutcomeHook(got.hook)), b.handle, idempotent.WithKey(orderKey), idempotent.WithPayloadValidation(amount))

	firstDone := make(chan error, 1)
	go func() { _, err := h(context.Background(), order{ID: "o", Amount: 100}); firstDone <- err }()
	<-b.started
	clk.Advance(time.Minute) // the owner overran its lease

	_, err := h(context.Background(), order{ID: "o", Amount: 999})
	require.ErrorIs(t, err, idempotent.ErrPayloadMismatch, "another payload never takes the key over")
	assert.Equal(t, idempotent.OutcomePayloadMismatch, got.last().Outcome)
	assert.EqualValues(t, 1, b.runs.Load())

	r, err := h(context.Background(), order{ID: "o", Amount: 100})
	require.NoError(t, err, "a retry of the first payload takes over")
	assert.EqualValues(t, 2, r.Run)
	assert.True(t, got.last().TookOver)
	assert.Equal(t, []int64{100, 100}, b.amounts, "the handler never saw the other payload")

	close(b.release)
	require.NoError(t, <-firstDone)
	assert.Equal(t, idempotent.OutcomeLeaseLost, got.last().Outcome)
}

func TestDurationsSaturate(t *testing.T) {
	t.Parallel()
	huge := time.Duration(math.MaxInt64)
	tests := []struct {
		name     string
		opts     []idempotent.Option
		deadline time.Duration // 0: no deadline
	}{
		{name: "max lease", opts: []idempotent.Option{idempotent.WithMaxLease(huge)}},
		{name: "clock skew", opts: []idempotent.Option{idempotent.WithClockSkew(huge)}},
		{name: "expiry", opts: []idempotent.Option{idempotent.WithExpiry(huge)}},
		{name: "all at once", opts: []idempotent.Option{idempotent.WithMaxLease(huge), idempotent.WithClockSkew(huge), idempotent.WithExpiry(huge)}},
		{name: "all at once, with a deadline", deadline: time.Hour,
			opts: []idempotent.Option{idempotent.WithMaxLease(huge), idempotent.WithClockSkew(huge), idempotent.WithExpiry(huge)}},
		{name: "negative values", opts: []idempotent.Option{idempotent.WithMaxLease(-huge), idempotent.WithClockSkew(-huge), idempotent.WithExpiry(-huge)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newSpyStore()
			clk := newClock()
			b := newBlocker()
			h := idempotent.Wrap(idempotent.New(store, append(tt.opts, idempotent.WithClock(clk.Now))...), b.handle, idempotent.WithKey(orderKey))
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			done := make(chan struct{})
			go func() { defer close(done); _, _ = h(ctx, order{ID: "o"}) }()
			<-b.started
			defer func() { close(b.release); <-done }()

			rec := store.claimed()
			now := clk.Now()
			assert.True(t, rec.LeaseExpiresAt.After(now), "lease end %v is not after now %v", rec.LeaseExpiresAt, now)
			assert.False(t, rec.ExpiresAt.Before(rec.LeaseExpiresAt), "the record expires before its lease")
			assert.Positive(t, rec.LeaseExpiresAt.UnixMilli(), "the lease end survives the stores' millisecond arithmetic")

			// A duplicate from another process a second later finds the
			// stored lease live.
			other := idempotent.Wrap(idempotent.New(store, append(tt.opts, idempotent.WithClock(clk.Now))...), b.handle, idempotent.WithKey(orderKey))
			clk.Advance(time.Second)
			_, err := other(context.Background(), order{ID: "o"})
			require.ErrorIs(t, err, idempotent.ErrInProgress)
			assert.EqualValues(t, 1, b.runs.Load(), "two handlers ran at once")
		})
	}
}

// pollRecorder is an injected sleep that records each wait and lets a test
// act when the waiting reaches a point in (virtual) time.
type pollRecorder struct {
	mu      sync.Mutex
	elapsed time.Duration
	waits   []time.Duration
	at      time.Duration // when elapsed reaches at, act runs once
	act     func()
}

func (p *pollRecorder) sleep(ctx context.Context, d time.Duration) error {
	p.mu.Lock()
	p.waits = append(p.waits, d)
	p.elapsed += d
	act := p.act
	if act != nil && p.elapsed >= p.at {
		p.act = nil
	} else {
		act = nil
	}
	p.mu.Unlock()
	if act != nil {
		act()
	}
	return ctx.Err()
}

func TestWaitInProgressWaitsTheWholeTime(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name      string
		wait      time.Duration
		finishAt  time.Duration // when the first invocation finishes; 0: never
		wantWaits []time.Duration
		wantErr   error
	}{
		{name: "shorter than the first backoff step", wait: 40 * ms, wantWaits: []time.Duration{40 * ms}, wantErr: idempotent.ErrInProgress},
		{name: "last poll at the end", wait: 1200 * ms, wantWaits: []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 450 * ms}, wantErr: idempotent.ErrInProgress},
		{name: "first finishes at 0.9 s of 1.2 s", wait: 1200 * ms, finishAt: 900 * ms, wantWaits: []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 450 * ms}},
		{name: "backoff caps at one second", wait: 3 * time.Second, wantWaits: []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, 450 * ms}, wantErr: idempotent.ErrInProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newSpyStore()
			b := newBlocker()
			polls := &pollRecorder{}
			// The first invocation runs in another process: the waiter
			// polls the store (in one process it would wait in memory).
			other := idempotent.Wrap(idempotent.New(store), b.handle, idempotent.WithKey(orderKey))
			h := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(tt.wait), idempotent.WithSleep(polls.sleep)), b.handle, idempotent.WithKey(orderKey))
			first := make(chan receipt, 1)
			go func() { r, _ := other(context.Background(), order{ID: "o"}); first <- r }()
			<-b.started
			var firstOut receipt
			if tt.finishAt > 0 {
				polls.at, polls.act = tt.finishAt, func() { close(b.release); firstOut = <-first }
			} else {
				defer func() { close(b.release); <-first }()
			}

			r, err := h(context.Background(), order{ID: "o"})
			assert.Equal(t, tt.wantWaits, polls.waits)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, firstOut, r, "the waiter replays the first response")
			assert.EqualValues(t, 1, b.runs.Load())
		})
	}
}

func TestWaitInProgressStopsWithTheContext(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	b := newBlocker()
	ctx, cancel := context.WithCancel(context.Background())
	polls := &pollRecorder{at: 100 * time.Millisecond, act: cancel}
	other := idempotent.Wrap(idempotent.New(store), b.handle, idempotent.WithKey(orderKey)) // another process
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithWaitInProgress(time.Hour), idempotent.WithSleep(polls.sleep)), b.handle, idempotent.WithKey(orderKey))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = other(context.Background(), order{ID: "o"}) }()
	<-b.started
	defer func() { close(b.release); <-done }()
	_, err := h(ctx, order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrInProgress)
	require.ErrorIs(t, err, context.Canceled)
}

func TestPrefixLimits(t *testing.T) {
	t.Parallel()
	var c counter
	store := idempotent.NewMemoryStore()
	tests := []struct {
		name, prefix, panic string
	}{
		{name: "empty", prefix: "", panic: "idempotent: WithPrefix: empty prefix"},
		{name: "too long", prefix: strings.Repeat("p", 512+1), panic: "idempotent: WithPrefix: prefix of 513 bytes (at most 512)"},
		{name: "2,000 bytes", prefix: strings.Repeat("p", 2000), panic: "idempotent: WithPrefix: prefix of 2000 bytes (at most 512)"},
		{name: "invalid UTF-8", prefix: "orders\xff", panic: "idempotent: WithPrefix: prefix is not valid UTF-8"},
		{name: "NUL", prefix: "orders\x00", panic: "idempotent: WithPrefix: prefix holds a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.PanicsWithValue(t, tt.panic, func() { idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix(tt.prefix)), c.handle) })
		})
	}
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix(strings.Repeat("p", 512))), c.handle, idempotent.WithKey(orderKey))
	_, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err, "a prefix of exactly 512 bytes is accepted")
	assert.False(t, errors.Is(err, idempotent.ErrStore))
}

// TestNestedResponseEncodingIsAHandlerError: an inner wrapped function's
// ErrResponseEncoding, returned by an outer handler, is the outer handler's
// failure: its record is released and a retry runs it again (only the inner
// record, whose handler ran, is completed without its response).
func TestNestedResponseEncodingIsAHandlerError(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	type loose struct {
		N any `json:"n"`
	}
	var innerRuns, outerRuns atomic.Int32
	inner := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("inner")), func(context.Context, order) (loose, error) {
		innerRuns.Add(1)
		return loose{N: 1}, nil // an int in an any: a JSON replay would give a float64
	}, idempotent.WithKey(orderKey))
	outer := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("outer")), func(ctx context.Context, o order) (receipt, error) {
		outerRuns.Add(1)
		if _, err := inner(ctx, o); err != nil {
			return receipt{}, err
		}
		return receipt{OrderID: o.ID}, nil
	}, idempotent.WithKey(orderKey))

	_, err := outer(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
	_, err = outer(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrResponseNotStored, "the retry runs the outer handler again; the inner record holds no response")
	assert.EqualValues(t, 2, outerRuns.Load(), "the outer record was released")
	assert.EqualValues(t, 1, innerRuns.Load(), "the inner handler ran once")
}

// TestEngineNotStored: work that ran but cannot store its response completes
// the record without it (a duplicate gets ErrResponseNotStored, never a second
// run); another engine's NotStored error is an ordinary failure (released).
func TestEngineNotStored(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	var got outcomes
	e := idempotent.New(store, idempotent.WithOutcomeHook(got.hook))
	other := idempotent.New(store)
	runs := 0
	streamed := errors.New("streamed to the client")
	res, err := e.Do(context.Background(), idempotent.Call{Key: "k"}, func(context.Context) ([]byte, error) {
		runs++
		return nil, e.NotStored(streamed)
	})
	require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
	require.ErrorIs(t, err, streamed)
	assert.True(t, res.Ran)
	assert.Equal(t, idempotent.OutcomeNotStored, got.last().Outcome)
	_, err = e.Do(context.Background(), idempotent.Call{Key: "k"}, func(context.Context) ([]byte, error) {
		runs++
		return nil, nil
	})
	require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
	assert.Equal(t, 1, runs)

	_, err = e.Do(context.Background(), idempotent.Call{Key: "k2"}, func(context.Context) ([]byte, error) {
		return nil, other.NotStored(streamed)
	})
	require.ErrorIs(t, err, streamed)
	assert.Equal(t, idempotent.OutcomeHandlerError, got.last().Outcome, "another engine's word is a failure here")
	res, err = e.Do(context.Background(), idempotent.Call{Key: "k2"}, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	assert.True(t, res.Ran, "the failure released the record")
}
