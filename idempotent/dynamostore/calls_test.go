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
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestWrapCallCounts holds the floor of DynamoDB calls per invocation that
// DESIGN.md promises, measured on the wire against DynamoDB Local.
func TestWrapCallCounts(t *testing.T) {
	t.Parallel()
	counter := &callCounter{}
	client := localddbtest.Client(t, withMiddleware(counter.apiOption))
	store, _ := newLocalStore(t, client, layouts[0])
	// Warm the table up with a claim and a completion outside the
	// wrapper: a first call to a busy DynamoDB Local (other tests run in
	// parallel, under -race) can take long enough to use up a short lease
	// before the handler runs ("no time left to run after the claim"), which
	// is also why the lease is 5 s, not shorter.
	warm := liveRecord(time.Now())
	_, err := store.Claim(t.Context(), warm, time.Now())
	require.NoError(t, err)
	warm.Status, warm.LeaseExpiresAt = storage.StatusCompleted, time.Time{}
	require.NoError(t, store.Complete(t.Context(), warm))

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
			idempotent.WithPrefix("test"),
			idempotent.WithClock(clock),
			idempotent.WithMaxLease(5 * time.Second),
			idempotent.WithLogger(slog.New(slog.DiscardHandler)),
			idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) {
				ev.mu.Lock()
				defer ev.mu.Unlock()
				ev.events = append(ev.events, e)
			}),
		}
		e := idempotent.New(store, append(opts, extra...)...)
		return idempotent.Wrap(e, h, idempotent.WithKey(func(r request) (string, error) { return r.Key, nil }))
	}
	ok := func(context.Context, request) (response, error) { return response{N: 1}, nil }
	errHandler := errors.New("handler failed")
	// threeSteps is a handler of three steps; each calls fn (when set)
	// with its index and fails with its error.
	threeSteps := func(fn func(int) error) func(context.Context, request) (response, error) {
		return func(ctx context.Context, _ request) (response, error) {
			sum := 0
			for i, name := range []string{"charge", "ledger", "email"} {
				n, err := idempotent.Step(ctx, name, func(context.Context) (int, error) {
					if fn != nil {
						if err := fn(i); err != nil {
							return 0, err
						}
					}
					return i + 1, nil
				})
				if err != nil {
					return response{}, err
				}
				sum += n
			}
			return response{N: sum}, nil
		}
	}
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
				// lease (5 s max lease + 2 s clock skew) and a retry takes over.
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
			// Claim, one write per step, complete.
			name: "new key with 3 steps",
			run: func(t *testing.T) []string {
				h := wrap(threeSteps(nil), &event{})
				counter.take()
				_, err := h(t.Context(), newKey())
				require.NoError(t, err)
				return counter.take()
			},
			want: []string{"PutItem", "UpdateItem", "UpdateItem", "UpdateItem", "UpdateItem"},
		},
		{
			// The first run records 2 steps and fails: the record is
			// suspended, not released (one call either way). The retry's
			// claim brings the 2 steps back: the claim (refused by the
			// record's steps) and the write that resumes them, + 1 step +
			// complete. One call more than a claim that keeps steps in one
			// UpdateItem (3), on purpose: the claim is the design's PutItem.
			name: "retry after step 2 of 3 failed",
			run: func(t *testing.T) []string {
				var failed atomic.Bool
				var ran [3]atomic.Int32
				h := wrap(threeSteps(func(i int) error {
					ran[i].Add(1)
					if i == 2 && !failed.Swap(true) {
						return errHandler
					}
					return nil
				}), &event{})
				req := newKey()
				counter.take()
				_, err := h(t.Context(), req)
				require.ErrorIs(t, err, errHandler)
				assert.Equal(t, []string{"PutItem", "UpdateItem", "UpdateItem", "UpdateItem"}, counter.take(),
					"claim, 2 steps, suspend")
				_, err = h(t.Context(), req)
				require.NoError(t, err)
				assert.EqualValues(t, 1, ran[0].Load(), "finished steps do not run again")
				assert.EqualValues(t, 1, ran[1].Load())
				assert.EqualValues(t, 2, ran[2].Load())
				return counter.take()
			},
			want: []string{"PutItem", "PutItem", "UpdateItem", "UpdateItem"},
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

// TestStoreCallCounts holds the store's own floor on the wire: a new key
// costs its claim and its completion, a step one write, a takeover of a
// record without steps the claim alone, and one that resumes steps the
// claim and the write that keeps them (so a resume whose steps are all done
// costs 3 calls with its completion).
func TestStoreCallCounts(t *testing.T) {
	t.Parallel()
	counter := &callCounter{}
	client := localddbtest.Client(t, withMiddleware(counter.apiOption))
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			// Not parallel: the layouts share the call counter.
			store, _ := newLocalStore(t, client, l)
			now := time.Now()
			rec := liveRecord(now)
			counter.take()

			_, err := store.Claim(t.Context(), rec, now)
			require.NoError(t, err)
			done := rec
			done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p{}")
			require.NoError(t, store.Complete(t.Context(), done))
			assert.Equal(t, []string{"PutItem", "UpdateItem"}, counter.take(), "new key: claim and complete")

			rec = liveRecord(now)
			_, err = store.Claim(t.Context(), rec, now)
			require.NoError(t, err)
			counter.take()
			steps := []storage.Step{{Name: "charge", Data: []byte("1")}, {Name: "ledger", Data: []byte("2")}}
			for _, st := range steps {
				require.NoError(t, store.AppendStep(t.Context(), rec.ID, rec.Lease, st))
				assert.Equal(t, []string{"UpdateItem"}, counter.take(), "one call per step")
			}

			later := rec.LeaseExpiresAt.Add(time.Millisecond)
			b := rival(rec, later)
			res, err := store.Claim(t.Context(), b, later)
			require.NoError(t, err)
			assert.Equal(t, storage.ClaimResult{Claimed: true, TookOver: true, Steps: steps}, res)
			assert.Equal(t, []string{"PutItem", "PutItem"}, counter.take(), "resuming: the claim, refused, and the write that keeps the steps")
			done = b
			done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p{}")
			require.NoError(t, store.Complete(t.Context(), done))
			assert.Equal(t, []string{"UpdateItem"}, counter.take())

			// A takeover of a record without steps: the claim alone.
			rec = liveRecord(now)
			_, err = store.Claim(t.Context(), rec, now)
			require.NoError(t, err)
			later = rec.LeaseExpiresAt.Add(time.Millisecond)
			counter.take()
			res, err = store.Claim(t.Context(), rival(rec, later), later)
			require.NoError(t, err)
			assert.Equal(t, storage.ClaimResult{Claimed: true, TookOver: true}, res)
			assert.Equal(t, []string{"PutItem"}, counter.take(), "takeover without steps: the claim alone")
		})
	}
}
