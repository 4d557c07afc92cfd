package idempotent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

type ctxTag struct{}

// recorder is a call hook that keeps what it hears, one entry per call.
type recorder struct {
	name  string
	trace string // its CallTrace.Trace

	mu     sync.Mutex
	starts []idempotent.CallInfo
	stages [][]idempotent.Progress
	ends   []idempotent.Event
	order  *[]string // shared by composed recorders
}

func (r *recorder) hook(ctx context.Context, info idempotent.CallInfo) (context.Context, idempotent.CallTrace) {
	r.mu.Lock()
	i := len(r.starts)
	r.starts = append(r.starts, info)
	r.stages = append(r.stages, nil)
	r.ends = append(r.ends, idempotent.Event{})
	if r.order != nil {
		*r.order = append(*r.order, "start "+r.name+" after "+tagOf(ctx))
	}
	r.mu.Unlock()
	return context.WithValue(ctx, ctxTag{}, r.name), idempotent.CallTrace{
		Trace: r.trace,
		Progress: func(p idempotent.Progress) {
			r.mu.Lock()
			r.stages[i] = append(r.stages[i], p)
			r.mu.Unlock()
		},
		End: func(ev idempotent.Event) {
			r.mu.Lock()
			r.ends[i] = ev
			if r.order != nil {
				*r.order = append(*r.order, "end "+r.name)
			}
			r.mu.Unlock()
		},
	}
}

func tagOf(ctx context.Context) string {
	if s, ok := ctx.Value(ctxTag{}).(string); ok {
		return s
	}
	return "-"
}

func stageNames(ps []idempotent.Progress) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Stage.String()
	}
	return out
}

func storeCalls(ps []idempotent.Progress) int {
	n := 0
	for _, p := range ps {
		if p.StoreCall() {
			n++
		}
	}
	return n
}

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestCallHookSeesTheCallAndStoresItsTrace(t *testing.T) {
	store := idempotent.NewMemoryStore()
	r := &recorder{name: "a", trace: tp}
	e := idempotent.New(store, quiet, idempotent.WithPrefix("svc"), idempotent.WithCallHook(r.hook))
	ctx := context.Background()
	work := func(ctx context.Context) ([]byte, error) {
		assert.Equal(t, "a", tagOf(ctx), "the work's context descends from the hook's")
		return []byte(`"ok"`), nil
	}
	_, err := e.Do(ctx, idempotent.Call{Key: "k1"}, work)
	require.NoError(t, err)
	res, err := e.Do(ctx, idempotent.Call{Key: "k1"}, work)
	require.NoError(t, err)
	require.False(t, res.Ran)

	require.Len(t, r.starts, 2)
	assert.Equal(t, "svc", r.starts[0].Prefix)
	assert.Contains(t, r.starts[0].Store, "memoryStore")
	assert.Equal(t, []string{"claim", "run", "commit"}, stageNames(r.stages[0]))
	assert.True(t, r.stages[0][0].Claimed)
	assert.Equal(t, 2, storeCalls(r.stages[0]))
	assert.Equal(t, idempotent.OutcomeExecuted, r.ends[0].Outcome)
	assert.Empty(t, r.ends[0].Trace, "a call that ran reads no stored trace")

	assert.Equal(t, []string{"claim"}, stageNames(r.stages[1]))
	assert.False(t, r.stages[1][0].Claimed)
	assert.Equal(t, idempotent.OutcomeReplayed, r.ends[1].Outcome)
	assert.Equal(t, tp, r.ends[1].Trace, "the replay hears the trace of the call that completed the record")
}

func TestCallHookTraceReachesTheRecord(t *testing.T) {
	for _, tc := range []struct {
		name, trace, want string
	}{
		{"a traceparent", tp, tp},
		{"none", "", ""},
		{"the longest", strings.Repeat("x", storage.MaxTraceBytes), strings.Repeat("x", storage.MaxTraceBytes)},
		{"too long", strings.Repeat("x", storage.MaxTraceBytes+1), ""},
		{"not printable ASCII", "00-\n", ""},
		{"not ASCII", "trace-€", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := idempotent.NewMemoryStore()
			r := &recorder{name: "a", trace: tc.trace}
			e := idempotent.New(store, quiet, idempotent.WithPrefix("svc"), idempotent.WithCallHook(r.hook))
			_, err := e.Do(context.Background(), idempotent.Call{Key: "k"}, func(context.Context) ([]byte, error) { return []byte(`1`), nil })
			require.NoError(t, err)
			rec, err := store.(storage.AdminStore).Get(context.Background(), idempotent.RecordID("svc", "", "k"))
			require.NoError(t, err)
			assert.Equal(t, tc.want, rec.Trace)
		})
	}
}

func TestCallHooksCompose(t *testing.T) {
	var order []string
	a := &recorder{name: "a", order: &order}
	b := &recorder{name: "b", trace: tp, order: &order}
	var outcomes []idempotent.Outcome
	store := idempotent.NewMemoryStore()
	e := idempotent.New(store, quiet, idempotent.WithPrefix("svc"),
		idempotent.WithCallHook(a.hook), idempotent.WithCallHook(nil), idempotent.WithCallHook(b.hook),
		idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
			order = append(order, "outcome hook")
			outcomes = append(outcomes, ev.Outcome)
		}))
	_, err := e.Do(context.Background(), idempotent.Call{Key: "k"}, func(ctx context.Context) ([]byte, error) {
		assert.Equal(t, "b", tagOf(ctx))
		return []byte(`1`), nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"start a after -", "start b after a", "outcome hook", "end a", "end b"}, order)
	assert.Equal(t, a.stages, b.stages, "both hear every stage")
	rec, err := store.(storage.AdminStore).Get(context.Background(), idempotent.RecordID("svc", "", "k"))
	require.NoError(t, err)
	assert.Equal(t, tp, rec.Trace, "the first non-empty Trace is stored")
}

func TestCallHookStages(t *testing.T) {
	ctx := context.Background()
	t.Run("rejected before the claim", func(t *testing.T) {
		r := &recorder{name: "a"}
		e := idempotent.New(idempotent.NewMemoryStore(), quiet, idempotent.WithCallHook(r.hook))
		_, err := e.Do(ctx, idempotent.Call{}, func(context.Context) ([]byte, error) { return nil, nil })
		require.ErrorIs(t, err, idempotent.ErrMissingKey)
		require.Len(t, r.ends, 1)
		assert.Equal(t, idempotent.OutcomeRejected, r.ends[0].Outcome)
		assert.Empty(t, r.stages[0])
		require.ErrorIs(t, e.Reject(ctx, idempotent.Call{Key: "k"}, idempotent.ErrInvalidKey), idempotent.ErrInvalidKey)
		require.Len(t, r.ends, 2)
		assert.Equal(t, idempotent.OutcomeRejected, r.ends[1].Outcome)
	})
	t.Run("a handler error after a step, then the resume", func(t *testing.T) {
		r := &recorder{name: "a"}
		e := idempotent.New(idempotent.NewMemoryStore(), quiet, idempotent.WithCallHook(r.hook))
		boom := errors.New("boom")
		work := func(fail bool) func(context.Context) ([]byte, error) {
			return func(ctx context.Context) ([]byte, error) {
				if _, err := idempotent.Step(ctx, "charge", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return nil, err
				}
				if fail {
					return nil, boom
				}
				return []byte(`1`), nil
			}
		}
		_, err := e.Do(ctx, idempotent.Call{Key: "k"}, work(true))
		require.ErrorIs(t, err, boom)
		_, err = e.Do(ctx, idempotent.Call{Key: "k"}, work(false))
		require.NoError(t, err)
		first, second := r.stages[0], r.stages[1]
		assert.Equal(t, []string{"claim", "step", "run", "give_back"}, stageNames(first))
		assert.Equal(t, "charge", first[1].Step)
		assert.False(t, first[1].Replayed)
		assert.ErrorIs(t, first[2].Err, boom)
		assert.Equal(t, 3, storeCalls(first))
		assert.Equal(t, []string{"claim", "step", "run", "commit"}, stageNames(second))
		assert.True(t, second[0].Resumed)
		assert.Equal(t, 1, second[0].Steps)
		assert.True(t, second[1].Replayed)
		assert.Equal(t, 2, storeCalls(second))
	})
	t.Run("waiting for an owner", func(t *testing.T) {
		r := &recorder{name: "a"}
		store := idempotent.NewMemoryStore()
		e := idempotent.New(store, quiet, idempotent.WithPrefix("svc"), idempotent.WithWaitInProgress(120*time.Millisecond), idempotent.WithCallHook(r.hook))
		// Another process holds the key for the whole wait.
		now := time.Now()
		_, err := store.Claim(ctx, storage.Record{ID: idempotent.RecordID("svc", "", "k"), Status: storage.StatusInProgress,
			ExpiresAt: now.Add(time.Hour), LeaseExpiresAt: now.Add(time.Hour), Lease: "other", Version: storage.RecordVersion}, now)
		require.NoError(t, err)
		_, err = e.Do(ctx, idempotent.Call{Key: "k"}, func(context.Context) ([]byte, error) { return nil, nil })
		require.ErrorIs(t, err, idempotent.ErrInProgress)
		names := stageNames(r.stages[0])
		require.GreaterOrEqual(t, len(names), 3)
		assert.Equal(t, "claim", names[0])
		assert.Equal(t, "wait", names[1])
		assert.Equal(t, "claim", names[len(names)-1], "the last poll")
		assert.Equal(t, idempotent.OutcomeInProgress, r.ends[0].Outcome)
	})
}

// TestCallHookCostsNothingUnset holds the promise of WithCallHook: an
// Engine without one allocates nothing at the report sites, so a local
// cache replay (the cheapest call) allocates what it did before call hooks
// existed (3, the answer's copy among them); with one it allocates more
// (so the measure can see them).
func TestCallHookCostsNothingUnset(t *testing.T) {
	ctx := context.Background()
	work := func(context.Context) ([]byte, error) { return []byte(`1`), nil }
	replayAllocs := func(opts ...idempotent.Option) float64 {
		e := idempotent.New(idempotent.NewMemoryStore(), append(opts, quiet, idempotent.WithLocalCache(8))...)
		_, err := e.Do(ctx, idempotent.Call{Key: "k"}, work)
		require.NoError(t, err)
		return testing.AllocsPerRun(100, func() { _, _ = e.Do(ctx, idempotent.Call{Key: "k"}, work) })
	}
	unset := replayAllocs()
	assert.LessOrEqual(t, unset, 3.0, "a cache replay without hooks")
	assert.Greater(t, replayAllocs(idempotent.WithCallHook((&recorder{name: "a"}).hook)), unset)
}
