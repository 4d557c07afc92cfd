package dynamostore_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/internal/localddb"
)

// TestWrapCallCounts holds the floor of DynamoDB calls per invocation that
// DESIGN.md promises, measured on the wire against DynamoDB Local.
func TestWrapCallCounts(t *testing.T) {
	t.Parallel()
	counter := &callCounter{}
	client := localddb.TestClient(t, withMiddleware(counter.apiOption))
	store, _ := newLocalStore(t, client, layouts[0])

	// The wrapper's clock: real time plus an offset that tests move forward
	// instead of sleeping.
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }

	type request struct{ Key string }
	type response struct{ N int }
	newKey := func() request { return request{Key: randomID()} }

	type event struct {
		mu     sync.Mutex
		events []idempotent.Event
	}
	wrap := func(h func(context.Context, request) (response, error), ev *event, extra ...idempotent.Option) func(context.Context, request) (response, error) {
		opts := []idempotent.Option{
			idempotent.WithKey(func(r request) (string, error) { return r.Key, nil }),
			idempotent.WithPrefix("test"),
			idempotent.WithClock(clock),
			idempotent.WithMaxLease(time.Second),
			idempotent.WithLogger(slog.New(slog.DiscardHandler)),
			idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) {
				ev.mu.Lock()
				defer ev.mu.Unlock()
				ev.events = append(ev.events, e)
			}),
		}
		return idempotent.Wrap[request, response](store, h, append(opts, extra...)...)
	}
	ok := func(context.Context, request) (response, error) { return response{N: 1}, nil }
	errHandler := errors.New("handler failed")
	// replay runs h for a new key, then again for the same key, which must
	// get the first response back; it returns the second invocation's calls.
	replay := func(t *testing.T, h func(context.Context, request) (response, error)) []string {
		t.Helper()
		req := newKey()
		_, err := h(t.Context(), req)
		require.NoError(t, err)
		counter.take()
		out, err := h(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, response{N: 1}, out)
		return counter.take()
	}

	// inProgress returns the calls of a duplicate through dup (nil: through
	// the first invocation's own wrapper) while the first one runs.
	inProgress := func(t *testing.T, dup func(context.Context, request) (response, error)) []string {
		var h func(context.Context, request) (response, error)
		var calls []string
		h = wrap(func(ctx context.Context, r request) (response, error) {
			d := dup
			if d == nil {
				d = h
			}
			counter.take()
			_, err := d(context.WithoutCancel(ctx), r) // a duplicate arrives meanwhile
			calls = counter.take()
			require.ErrorIs(t, err, idempotent.ErrInProgress)
			return response{}, nil
		}, &event{})
		_, err := h(t.Context(), newKey())
		require.NoError(t, err)
		return calls
	}

	tests := []struct {
		name string
		// run performs the scenario and returns the calls of the invocation
		// under test (counter.take() right before it).
		run  func(t *testing.T) []string
		want []string
	}{
		{
			name: "new key",
			run: func(t *testing.T) []string {
				h := wrap(ok, &event{})
				counter.take()
				_, err := h(t.Context(), newKey())
				require.NoError(t, err)
				return counter.take()
			},
			want: []string{"PutItem", "UpdateItem"},
		},
		{
			name: "duplicate after completion",
			run: func(t *testing.T) []string {
				var runs atomic.Int32
				h := wrap(func(ctx context.Context, r request) (response, error) { runs.Add(1); return ok(ctx, r) }, &event{})
				calls := replay(t, h)
				assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
				return calls
			},
			want: []string{"PutItem"},
		},
		{
			name: "duplicate while in progress",
			run: func(t *testing.T) []string {
				return inProgress(t, wrap(ok, &event{})) // from another process
			},
			want: []string{"PutItem"},
		},
		{
			name: "duplicate while in progress, same process",
			run: func(t *testing.T) []string {
				return inProgress(t, nil) // answered by the flight in the air
			},
			want: []string{},
		},
		{
			name: "handler error",
			run: func(t *testing.T) []string {
				h := wrap(func(context.Context, request) (response, error) { return response{}, errHandler }, &event{})
				counter.take()
				_, err := h(t.Context(), newKey())
				require.ErrorIs(t, err, errHandler)
				return counter.take()
			},
			want: []string{"PutItem", "DeleteItem"},
		},
		{
			name: "takeover after the lease",
			run: func(t *testing.T) []string {
				// The first owner overruns: while it runs, the clock passes its
				// lease (1 s max lease + 2 s clock skew) and a retry takes over.
				var h func(context.Context, request) (response, error)
				var calls []string
				var depth atomic.Int32
				ev := &event{}
				h = wrap(func(ctx context.Context, r request) (response, error) {
					if depth.Add(1) > 1 {
						return response{N: 2}, nil // the retry's run
					}
					offset.Add(int64(10 * time.Second))
					counter.take()
					out, err := h(context.WithoutCancel(ctx), r)
					calls = counter.take()
					require.NoError(t, err)
					assert.Equal(t, response{N: 2}, out)
					return response{N: 1}, nil
				}, ev)
				_, err := h(t.Context(), newKey())
				require.NoError(t, err, "the overrunning owner keeps its response")
				ev.mu.Lock()
				defer ev.mu.Unlock()
				require.Len(t, ev.events, 2)
				assert.Equal(t, idempotent.OutcomeExecuted, ev.events[0].Outcome)
				assert.True(t, ev.events[0].TookOver, "the retry reports the takeover")
				assert.Equal(t, idempotent.OutcomeLeaseLost, ev.events[1].Outcome, "the first owner is fenced out")
				return calls
			},
			want: []string{"PutItem", "UpdateItem"},
		},
		{
			name: "local cache replay",
			run: func(t *testing.T) []string {
				ev := &event{}
				calls := replay(t, wrap(ok, ev, idempotent.WithLocalCache(16)))
				ev.mu.Lock()
				defer ev.mu.Unlock()
				assert.True(t, ev.events[len(ev.events)-1].FromCache)
				return calls
			},
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the scenarios share the call counter.
			got := tt.run(t)
			t.Logf("%s: %d calls %v", tt.name, len(got), got)
			assert.Equal(t, tt.want, got)
		})
	}
}
