package idempotent_test

import (
	"context"
	"errors"
	"fmt"
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

// countingStore counts every store call in front of a MemoryStore.
type countingStore struct {
	storage.StepStore
	claims, completes, releases, appends, suspends atomic.Int32
}

func newCountingStore() *countingStore {
	return &countingStore{StepStore: idempotent.NewMemoryStore()}
}

func (s *countingStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.claims.Add(1)
	return s.StepStore.Claim(ctx, rec, now)
}

func (s *countingStore) Complete(ctx context.Context, rec storage.Record) error {
	s.completes.Add(1)
	return s.StepStore.Complete(ctx, rec)
}

func (s *countingStore) Release(ctx context.Context, id, lease string) error {
	s.releases.Add(1)
	return s.StepStore.Release(ctx, id, lease)
}

func (s *countingStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	s.appends.Add(1)
	return s.StepStore.AppendStep(ctx, id, lease, step)
}

func (s *countingStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	s.suspends.Add(1)
	return s.StepStore.Suspend(ctx, id, lease, leaseEnd)
}

// calls is {claims, appends, completes, releases, suspends}.
func (s *countingStore) calls() [5]int32 {
	return [5]int32{s.claims.Load(), s.appends.Load(), s.completes.Load(), s.releases.Load(), s.suspends.Load()}
}

type stepOrder struct {
	Key    string `json:"key"`
	Amount int    `json:"amount"`
}

type charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// payment is a handler with three steps whose side effects are counted, and
// a failure that can be switched on after each of them.
type payment struct {
	runs      [3]atomic.Int32
	failAfter atomic.Int32 // 1..3: fail after that step; 0: succeed
	keys      [3]atomic.Value
}

var errLedgerDown = errors.New("ledger down")

func (p *payment) handle(ctx context.Context, o stepOrder) (string, error) {
	names := []string{"charge", "ledger", "email"}
	var first charge
	for i, name := range names {
		got, err := idempotent.Step(ctx, name, func(ctx context.Context) (charge, error) {
			p.runs[i].Add(1)
			p.keys[i].Store(idempotent.DownstreamKey(ctx))
			return charge{ID: "ch_" + o.Key, Amount: o.Amount}, nil
		})
		if err != nil {
			return "", err
		}
		if i == 0 {
			first = got
		}
		if int(p.failAfter.Load()) == i+1 {
			return "", errLedgerDown
		}
	}
	return "paid " + first.ID, nil
}

func (p *payment) counts() [3]int32 {
	return [3]int32{p.runs[0].Load(), p.runs[1].Load(), p.runs[2].Load()}
}

func stepOrderKey(o stepOrder) (string, error) { return o.Key, nil }

func TestStepsRunOnceAcrossAFailedRun(t *testing.T) {
	store := newCountingStore()
	p := &payment{}
	h := idempotent.Wrap(idempotent.New(store), p.handle, idempotent.WithKey(stepOrderKey), idempotent.WithPayloadValidation(func(o stepOrder) (any, error) { return o, nil }))
	ctx := context.Background()
	o := stepOrder{Key: "k1", Amount: 1500}

	p.failAfter.Store(2)
	_, err := h(ctx, o)
	require.ErrorIs(t, err, errLedgerDown)
	assert.Equal(t, [3]int32{1, 1, 0}, p.counts())
	// claim, two steps, then Suspend (not Release): the steps are kept.
	assert.Equal(t, [5]int32{1, 2, 0, 0, 1}, store.calls())

	p.failAfter.Store(0)
	got, err := h(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, "paid ch_k1", got)
	assert.Equal(t, [3]int32{1, 1, 1}, p.counts(), "a finished step ran again")
	// The retry: claim (resuming for free) + the third step + complete.
	assert.Equal(t, [5]int32{2, 3, 1, 0, 1}, store.calls())

	got, err = h(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, "paid ch_k1", got)
	assert.Equal(t, [3]int32{1, 1, 1}, p.counts())

	// Another payload for the same key is refused, not resumed.
	_, err = h(ctx, stepOrder{Key: "k1", Amount: 9})
	require.ErrorIs(t, err, idempotent.ErrPayloadMismatch)
}

func TestNewKeyWithStepsCosts(t *testing.T) {
	store := newCountingStore()
	p := &payment{}
	h := idempotent.Wrap(idempotent.New(store), p.handle, idempotent.WithKey(stepOrderKey))
	_, err := h(context.Background(), stepOrder{Key: "k", Amount: 1})
	require.NoError(t, err)
	// claim + 3 steps + complete = 5 calls; no step is read back.
	assert.Equal(t, [5]int32{1, 3, 1, 0, 0}, store.calls())
}

// crashedOwner writes the state a crashed owner leaves behind: a claimed
// record whose lease ends at leaseEnd, holding the given steps.
func crashedOwner(t *testing.T, store storage.StepStore, id string, now, leaseEnd time.Time, steps ...storage.Step) {
	t.Helper()
	rec := storage.Record{ID: id, Status: storage.StatusInProgress, ExpiresAt: now.Add(time.Hour),
		LeaseExpiresAt: leaseEnd, Lease: "crashed-owner", Version: storage.RecordVersion}
	res, err := store.Claim(context.Background(), rec, now)
	require.NoError(t, err)
	require.True(t, res.Claimed)
	for _, st := range steps {
		require.NoError(t, store.AppendStep(context.Background(), id, rec.Lease, st))
	}
}

func TestTakeoverResumesAfterTheLastFinishedStep(t *testing.T) {
	clk := newClock()
	store := newCountingStore()
	id := idempotent.RecordID("pay", "", "k2")
	crashedOwner(t, store, id, clk.Now(), clk.Now().Add(10*time.Second),
		storage.Step{Name: "charge", Data: []byte(`{"id":"ch_first","amount":7}`)},
		storage.Step{Name: "ledger", Data: []byte(`{"id":"ch_first","amount":7}`)})
	before := store.calls()

	p := &payment{}
	var tookOver atomic.Bool
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now)), func(ctx context.Context, o stepOrder) (string, error) {
		inv, _ := idempotent.FromContext(ctx)
		tookOver.Store(inv.TookOver)
		return p.handle(ctx, o)
	}, idempotent.WithKey(stepOrderKey))

	_, err := h(context.Background(), stepOrder{Key: "k2", Amount: 7})
	require.ErrorIs(t, err, idempotent.ErrInProgress, "the crashed owner's lease still runs")
	clk.Advance(11 * time.Second)
	got, err := h(context.Background(), stepOrder{Key: "k2", Amount: 7})
	require.NoError(t, err)
	assert.True(t, tookOver.Load())
	assert.Equal(t, "paid ch_first", got, "the recorded result of the first owner's charge is used")
	assert.Equal(t, [3]int32{0, 0, 1}, p.counts(), "only the unfinished step runs")
	after := store.calls()
	// Two claims (one refused while the lease ran), one step, one completion.
	assert.Equal(t, [5]int32{2, 1, 1, 0, 0}, [5]int32{after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3], after[4] - before[4]})
}

func TestStepsAreNotResumedForAnotherPayload(t *testing.T) {
	// A record written without a fingerprint may be taken over by any
	// payload (the liveness rule binds nothing), but its steps are not
	// resumed by a claim that carries one: they may be another payload's.
	clk := newClock()
	store := idempotent.NewMemoryStore()
	id := idempotent.RecordID("pay", "", "k3")
	crashedOwner(t, store, id, clk.Now(), clk.Now().Add(time.Second),
		storage.Step{Name: "charge", Data: []byte(`{"id":"ch_other","amount":1}`)})
	clk.Advance(2 * time.Second)
	p := &payment{}
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now)), p.handle, idempotent.WithKey(stepOrderKey), idempotent.WithPayloadValidation(func(o stepOrder) (any, error) { return o, nil }))
	got, err := h(context.Background(), stepOrder{Key: "k3", Amount: 5})
	require.NoError(t, err)
	assert.Equal(t, "paid ch_k3", got)
	assert.Equal(t, [3]int32{1, 1, 1}, p.counts())
}

func TestStepErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler func(ctx context.Context, o stepOrder) (string, error)
		want    error
	}{
		{"empty name", func(ctx context.Context, o stepOrder) (string, error) {
			_, err := idempotent.Step(ctx, "", func(context.Context) (int, error) { return 1, nil })
			return "", err
		}, idempotent.ErrInvalidStep},
		{"overlong name", func(ctx context.Context, o stepOrder) (string, error) {
			_, err := idempotent.Step(ctx, strings.Repeat("s", 128+1), func(context.Context) (int, error) { return 1, nil })
			return "", err
		}, idempotent.ErrInvalidStep},
		{"repeated name", func(ctx context.Context, o stepOrder) (string, error) {
			for range 2 {
				if _, err := idempotent.Step(ctx, "charge", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return "", err
				}
			}
			return "", nil
		}, idempotent.ErrInvalidStep},
		{"result not encodable", func(ctx context.Context, o stepOrder) (string, error) {
			_, err := idempotent.Step(ctx, "charge", func(context.Context) (chan int, error) { return make(chan int), nil })
			return "", err
		}, idempotent.ErrStepNotRecorded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingStore()
			h := idempotent.Wrap(idempotent.New(store), tt.handler, idempotent.WithKey(stepOrderKey))
			_, err := h(context.Background(), stepOrder{Key: "k"})
			require.ErrorIs(t, err, tt.want)
			// Nothing is left INPROGRESS: the failed run gave the record back.
			c := store.calls()
			assert.Equal(t, int32(1), c[3]+c[4], "release or suspend")
		})
	}
}

func TestStepTooLargeIsAClearErrorNotAStuckRecord(t *testing.T) {
	store := idempotent.NewMemoryStore() // items of storage.DefaultMaxItemBytes, as DynamoDB's
	big := storage.DefaultMaxItemBytes + 1
	runs := 0
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o stepOrder) (string, error) {
		v, err := idempotent.Step(ctx, "render", func(context.Context) (string, error) {
			runs++
			return strings.Repeat("x", big), nil
		})
		if err != nil {
			assert.Len(t, v, big, "the step's result comes with the error: it ran")
			return "", err
		}
		return "ok", nil
	}, idempotent.WithKey(stepOrderKey))
	_, err := h(context.Background(), stepOrder{Key: "big"})
	require.ErrorIs(t, err, idempotent.ErrStepNotRecorded)
	require.ErrorIs(t, err, storage.ErrTooLarge)
	// The record was given back: a retry runs again instead of waiting.
	_, err = h(context.Background(), stepOrder{Key: "big"})
	require.ErrorIs(t, err, idempotent.ErrStepNotRecorded)
	assert.Equal(t, 2, runs)
}

func TestStepsAreMatchedByNameAcrossDeployments(t *testing.T) {
	// Steps are matched by name, not position: a record written by an older
	// deployment whose step was renamed ("reserve") neither blocks the key
	// nor is mixed in; the handler's own steps run and a warning names the
	// step it did not take.
	clk := newClock()
	store := idempotent.NewMemoryStore()
	id := idempotent.RecordID("pay", "", "k4")
	crashedOwner(t, store, id, clk.Now(), clk.Now().Add(time.Second),
		storage.Step{Name: "reserve", Data: []byte(`1`)},
		storage.Step{Name: "ledger", Data: []byte(`{"id":"ch_old","amount":3}`)})
	clk.Advance(2 * time.Second)
	var logs testlog.Buffer
	p := &payment{}
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now), idempotent.WithLogger(testlog.Logger(&logs))), p.handle, idempotent.WithKey(stepOrderKey))
	got, err := h(context.Background(), stepOrder{Key: "k4", Amount: 3})
	require.NoError(t, err)
	assert.Equal(t, "paid ch_k4", got)
	assert.Equal(t, [3]int32{1, 0, 1}, p.counts(), "the held ledger step is answered wherever it comes; the others run")
	assert.Contains(t, logs.String(), `"steps":["reserve"]`, "the untaken step is named in a warning")
}

// flakyStepStore fails the first AppendStep of the named step, as a store
// outage or throttling would.
type flakyStepStore struct {
	*countingStore
	failStep string
	failed   atomic.Bool
}

func (s *flakyStepStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	if step.Name == s.failStep && s.failed.CompareAndSwap(false, true) {
		s.appends.Add(1)
		return errors.New("store: throttled")
	}
	return s.countingStore.AppendStep(ctx, id, lease, step)
}

func TestAnUnrecordedStepRunsAgainOnTheRetry(t *testing.T) {
	// The first step ran but its record write failed (ErrStepNotRecorded);
	// the handler went on, the second step was recorded, then the handler
	// failed. The retry runs the first step again and answers the second
	// from the record: a transient store error never strands the key.
	store := &flakyStepStore{countingStore: newCountingStore(), failStep: "charge"}
	p := &payment{}
	var sawNotRecorded atomic.Bool
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o stepOrder) (string, error) {
		for i, name := range []string{"charge", "ledger", "email"} {
			_, err := idempotent.Step(ctx, name, func(context.Context) (charge, error) {
				p.runs[i].Add(1)
				return charge{ID: "ch_" + o.Key}, nil
			})
			if errors.Is(err, idempotent.ErrStepNotRecorded) {
				sawNotRecorded.Store(true) // ran: go on, as ErrStepNotRecorded's doc says a handler may
			} else if err != nil {
				return "", err
			}
			if int(p.failAfter.Load()) == i+1 {
				return "", errLedgerDown
			}
		}
		return "done", nil
	}, idempotent.WithKey(stepOrderKey))
	ctx := context.Background()
	p.failAfter.Store(2)
	_, err := h(ctx, stepOrder{Key: "k"})
	require.ErrorIs(t, err, errLedgerDown)
	require.True(t, sawNotRecorded.Load())
	assert.Equal(t, [3]int32{1, 1, 0}, p.counts())

	p.failAfter.Store(0)
	got, err := h(ctx, stepOrder{Key: "k"})
	require.NoError(t, err, "the retry must not be refused")
	assert.Equal(t, "done", got)
	assert.Equal(t, [3]int32{2, 1, 1}, p.counts(), "the unrecorded step runs again, the recorded one does not")
}

func TestConcurrentAndNestedSteps(t *testing.T) {
	// Steps taken from several goroutines at once, and a step inside
	// another's function, resume by name: what finished and was recorded is
	// answered, the rest runs.
	type counts struct{ a, b, c, outer, inner atomic.Int32 }
	tests := []struct {
		name string
		// handler takes its steps, failing on the first run (fail true)
		// after some of them finished.
		handler func(ctx context.Context, n *counts, fail bool) error
		first   [5]int32 // a, b, c, outer, inner after the failed run
		second  [5]int32 // after the retry
	}{
		{"concurrent", func(ctx context.Context, n *counts, fail bool) error {
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i, c := range []*atomic.Int32{&n.a, &n.b, &n.c} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = idempotent.Step(ctx, fmt.Sprint("part-", i), func(context.Context) (int, error) {
						c.Add(1)
						if fail && i == 1 {
							return 0, errLedgerDown
						}
						return i, nil
					})
				}()
			}
			wg.Wait()
			return errors.Join(errs...)
		}, [5]int32{1, 1, 1, 0, 0}, [5]int32{1, 2, 1, 0, 0}},
		{"nested, the outer step fails after the inner one", func(ctx context.Context, n *counts, fail bool) error {
			_, err := idempotent.Step(ctx, "outer", func(ctx context.Context) (int, error) {
				n.outer.Add(1)
				v, err := idempotent.Step(ctx, "inner", func(context.Context) (int, error) {
					n.inner.Add(1)
					return 7, nil
				})
				if err != nil || fail {
					return 0, errors.Join(err, errLedgerDown)
				}
				return v + 1, nil
			})
			return err
		}, [5]int32{0, 0, 0, 1, 1}, [5]int32{0, 0, 0, 2, 1}},
		{"nested, the handler fails after the outer step", func(ctx context.Context, n *counts, fail bool) error {
			v, err := idempotent.Step(ctx, "outer", func(ctx context.Context) (int, error) {
				n.outer.Add(1)
				return idempotent.Step(ctx, "inner", func(context.Context) (int, error) {
					n.inner.Add(1)
					return 7, nil
				})
			})
			if err == nil && v != 7 {
				return fmt.Errorf("outer = %d, want 7", v)
			}
			if err == nil && fail {
				return errLedgerDown
			}
			return err
		}, [5]int32{0, 0, 0, 1, 1}, [5]int32{0, 0, 0, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n counts
			var fail atomic.Bool
			fail.Store(true)
			h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), func(ctx context.Context, o stepOrder) (string, error) {
				if err := tt.handler(ctx, &n, fail.Load()); err != nil {
					return "", err
				}
				return "ok", nil
			}, idempotent.WithKey(stepOrderKey))
			snapshot := func() [5]int32 { return [5]int32{n.a.Load(), n.b.Load(), n.c.Load(), n.outer.Load(), n.inner.Load()} }
			_, err := h(context.Background(), stepOrder{Key: "k"})
			require.ErrorIs(t, err, errLedgerDown)
			assert.Equal(t, tt.first, snapshot())
			fail.Store(false)
			got, err := h(context.Background(), stepOrder{Key: "k"})
			require.NoError(t, err)
			assert.Equal(t, "ok", got)
			assert.Equal(t, tt.second, snapshot())
		})
	}
}

func TestStepAfterTheHandlerReturnedIsRefused(t *testing.T) {
	// A goroutine the handler did not wait for takes a step after the
	// handler returned: it is refused before its function runs, so no side
	// effect happens outside the record's life.
	var ran atomic.Bool
	late := make(chan error, 1)
	release := make(chan struct{})
	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), func(ctx context.Context, o stepOrder) (string, error) {
		go func() {
			<-release
			_, err := idempotent.Step(ctx, "late", func(context.Context) (int, error) {
				ran.Store(true)
				return 1, nil
			})
			late <- err
		}()
		return "ok", nil
	}, idempotent.WithKey(stepOrderKey))
	_, err := h(context.Background(), stepOrder{Key: "k"})
	require.NoError(t, err)
	close(release)
	require.ErrorIs(t, <-late, idempotent.ErrInvalidStep)
	assert.False(t, ran.Load())
}

func TestResumeIsReportedAsAResumeNotATakeover(t *testing.T) {
	clk := newClock()
	var logs testlog.Buffer
	var events []idempotent.Event
	var invs []idempotent.Invocation
	p := &payment{}
	store := idempotent.NewMemoryStore()
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now), idempotent.WithLogger(testlog.Logger(&logs)), idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) { events = append(events, ev) })), func(ctx context.Context, o stepOrder) (string, error) {
		inv, _ := idempotent.FromContext(ctx)
		invs = append(invs, inv)
		return p.handle(ctx, o)
	}, idempotent.WithKey(stepOrderKey))
	ctx := context.Background()

	// A handler error after a finished step suspends the record; the retry
	// resumes it.
	p.failAfter.Store(1)
	_, err := h(ctx, stepOrder{Key: "r"})
	require.ErrorIs(t, err, errLedgerDown)
	p.failAfter.Store(0)
	_, err = h(ctx, stepOrder{Key: "r"})
	require.NoError(t, err)
	require.Len(t, events, 2)
	assert.Equal(t, idempotent.OutcomeExecuted, events[1].Outcome)
	assert.True(t, events[1].Resumed)
	assert.False(t, events[1].TookOver, "a resume after a handler error is not a takeover")
	assert.True(t, invs[1].Resumed)
	assert.False(t, invs[1].TookOver)
	assert.Contains(t, logs.String(), `"resumed":true`)
	assert.NotContains(t, logs.String(), "took_over")
	assert.NotContains(t, logs.String(), `"level":"WARN"`)

	// A crashed owner's record is taken over: a takeover, reported as one.
	id := idempotent.RecordID("pay", "", "c")
	crashedOwner(t, store, id, clk.Now(), clk.Now().Add(time.Second),
		storage.Step{Name: "charge", Data: []byte(`{"id":"ch_c"}`)})
	clk.Advance(2 * time.Second)
	_, err = h(ctx, stepOrder{Key: "c"})
	require.NoError(t, err)
	last := events[len(events)-1]
	assert.True(t, last.TookOver)
	assert.False(t, last.Resumed)
	assert.True(t, invs[len(invs)-1].TookOver)
	assert.Contains(t, logs.String(), `"took_over":true`)
}

func TestStepDownstreamKeys(t *testing.T) {
	p := &payment{}
	var recordKey string
	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), func(ctx context.Context, o stepOrder) (string, error) {
		recordKey = idempotent.DownstreamKey(ctx)
		return p.handle(ctx, o)
	}, idempotent.WithKey(stepOrderKey))
	_, err := h(context.Background(), stepOrder{Key: "k5"})
	require.NoError(t, err)
	seen := map[string]bool{recordKey: true}
	for i := range p.keys {
		k, _ := p.keys[i].Load().(string)
		assert.Len(t, k, 32)
		assert.False(t, seen[k], "step %d's downstream key is not its own", i)
		seen[k] = true
	}
}

func TestStepOutsideAWrappedHandlerJustRuns(t *testing.T) {
	v, err := idempotent.Step(context.Background(), "charge", func(context.Context) (int, error) { return 42, nil })
	require.NoError(t, err)
	assert.Equal(t, 42, v)
}

func TestStepsThroughTheEngine(t *testing.T) {
	store := newCountingStore()
	e := idempotent.New(store)
	runs := 0
	work := func(ctx context.Context) ([]byte, error) {
		if _, err := idempotent.Step(ctx, "charge", func(context.Context) (int, error) { runs++; return 1, nil }); err != nil {
			return nil, err
		}
		if runs == 1 {
			return nil, errLedgerDown
		}
		return []byte(`"ok"`), nil
	}
	_, err := e.Do(context.Background(), idempotent.Call{Key: "k6"}, work)
	require.ErrorIs(t, err, errLedgerDown)
	runs++ // the next run succeeds
	res, err := e.Do(context.Background(), idempotent.Call{Key: "k6"}, work)
	require.NoError(t, err)
	assert.Equal(t, `"ok"`, string(res.Response))
	assert.Equal(t, 2, runs, "the recorded step did not run again")
}

func TestTakeoverDelay(t *testing.T) {
	for _, tt := range []struct {
		name  string
		delay time.Duration
		// at is when the next claim comes, after the crashed owner's lease.
		at      time.Duration
		wantErr error
	}{
		{"held during the delay", 10 * time.Minute, 5 * time.Minute, idempotent.ErrInProgress},
		{"taken over after it", 10 * time.Minute, 11 * time.Minute, nil},
		{"never before the expiry", 100 * 365 * 24 * time.Hour, 50 * time.Minute, idempotent.ErrInProgress},
		{"claimable once expired", 100 * 365 * 24 * time.Hour, 2 * time.Hour, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			store := idempotent.NewMemoryStore()
			started := make(chan struct{})
			hang := make(chan struct{})
			defer close(hang)
			opts := []idempotent.Option{idempotent.WithClock(clk.Now),
				idempotent.WithMaxLease(time.Minute), idempotent.WithTakeoverDelay(tt.delay)}
			crashing := idempotent.Wrap(idempotent.New(store, opts...), func(ctx context.Context, o stepOrder) (string, error) {
				close(started)
				<-hang // the owner hangs: as far as the record knows, it crashed
				return "", nil
			}, idempotent.WithKey(stepOrderKey))
			go func() { _, _ = crashing(context.Background(), stepOrder{Key: "k"}) }()
			<-started
			clk.Advance(time.Minute + (2 * time.Second) + tt.at)
			other := idempotent.Wrap(idempotent.New(store, opts...), func(ctx context.Context, o stepOrder) (string, error) { return "ran", nil }, idempotent.WithKey(stepOrderKey))
			_, err := other(context.Background(), stepOrder{Key: "k"})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
}

// plainStore is a storage.Store without the StepStore capability.
type plainStore struct{ m storage.StepStore }

func (s plainStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	return s.m.Claim(ctx, rec, now)
}
func (s plainStore) Complete(ctx context.Context, rec storage.Record) error {
	return s.m.Complete(ctx, rec)
}
func (s plainStore) Release(ctx context.Context, id, lease string) error {
	return s.m.Release(ctx, id, lease)
}

func TestStepWithAStoreWithoutStepsFailsBeforeRunning(t *testing.T) {
	// Steps are an optional capability: with a store that lacks it, Step
	// refuses before its function runs (never a silently unrecorded step),
	// and the record is released, not left in progress.
	store := plainStore{idempotent.NewMemoryStore()}
	ran := 0
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, o stepOrder) (string, error) {
		_, err := idempotent.Step(ctx, "charge", func(context.Context) (int, error) { ran++; return 1, nil })
		return "", err
	}, idempotent.WithKey(stepOrderKey))
	for range 2 {
		_, err := h(context.Background(), stepOrder{Key: "k"})
		require.ErrorIs(t, err, idempotent.ErrInvalidStep)
		assert.Contains(t, err.Error(), "StepStore")
	}
	assert.Zero(t, ran)
}
