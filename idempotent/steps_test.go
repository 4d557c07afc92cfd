package idempotent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// countingStore counts every store call in front of a MemoryStore.
type countingStore struct {
	*idempotent.MemoryStore
	claims, completes, releases, appends, suspends atomic.Int32
}

func newCountingStore() *countingStore {
	return &countingStore{MemoryStore: idempotent.NewMemoryStore()}
}

func (s *countingStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.claims.Add(1)
	return s.MemoryStore.Claim(ctx, rec, now)
}

func (s *countingStore) Complete(ctx context.Context, rec storage.Record) error {
	s.completes.Add(1)
	return s.MemoryStore.Complete(ctx, rec)
}

func (s *countingStore) Release(ctx context.Context, id, lease string) error {
	s.releases.Add(1)
	return s.MemoryStore.Release(ctx, id, lease)
}

func (s *countingStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	s.appends.Add(1)
	return s.MemoryStore.AppendStep(ctx, id, lease, step)
}

func (s *countingStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	s.suspends.Add(1)
	return s.MemoryStore.Suspend(ctx, id, lease, leaseEnd)
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
	h := idempotent.Wrap(store, p.handle, idempotent.WithKey(stepOrderKey), idempotent.WithPayloadValidation(func(o stepOrder) (any, error) { return o, nil }))
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
	h := idempotent.Wrap(store, p.handle, idempotent.WithKey(stepOrderKey))
	_, err := h(context.Background(), stepOrder{Key: "k", Amount: 1})
	require.NoError(t, err)
	// claim + 3 steps + complete = 5 calls; no step is read back.
	assert.Equal(t, [5]int32{1, 3, 1, 0, 0}, store.calls())
}

// crashedOwner writes the state a crashed owner leaves behind: a claimed
// record whose lease ends at leaseEnd, holding the given steps.
func crashedOwner(t *testing.T, store storage.Store, id string, now, leaseEnd time.Time, steps ...storage.Step) {
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
	h := idempotent.Wrap(store, func(ctx context.Context, o stepOrder) (string, error) {
		inv, _ := idempotent.FromContext(ctx)
		tookOver.Store(inv.TookOver)
		return p.handle(ctx, o)
	}, idempotent.WithKey(stepOrderKey), idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now))

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
	h := idempotent.Wrap(store, p.handle, idempotent.WithKey(stepOrderKey), idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now),
		idempotent.WithPayloadValidation(func(o stepOrder) (any, error) { return o, nil }))
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
			_, err := idempotent.Step(ctx, strings.Repeat("s", idempotent.MaxStepNameBytes+1), func(context.Context) (int, error) { return 1, nil })
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
			h := idempotent.Wrap(store, tt.handler, idempotent.WithKey(stepOrderKey))
			_, err := h(context.Background(), stepOrder{Key: "k"})
			require.ErrorIs(t, err, tt.want)
			// Nothing is left INPROGRESS: the failed run gave the record back.
			c := store.calls()
			assert.Equal(t, int32(1), c[3]+c[4], "release or suspend")
		})
	}
}

func TestStepTooLargeIsAClearErrorNotAStuckRecord(t *testing.T) {
	store := idempotent.NewMemoryStore()
	store.MaxItemBytes = 2 << 10
	runs := 0
	h := idempotent.Wrap(store, func(ctx context.Context, o stepOrder) (string, error) {
		v, err := idempotent.Step(ctx, "render", func(context.Context) (string, error) {
			runs++
			return strings.Repeat("x", 4<<10), nil
		})
		if err != nil {
			assert.Len(t, v, 4<<10, "the step's result comes with the error: it ran")
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

func TestStepsChangedBetweenDeployments(t *testing.T) {
	clk := newClock()
	store := idempotent.NewMemoryStore()
	id := idempotent.RecordID("pay", "", "k4")
	crashedOwner(t, store, id, clk.Now(), clk.Now().Add(time.Second),
		storage.Step{Name: "reserve", Data: []byte(`1`)})
	clk.Advance(2 * time.Second)
	p := &payment{}
	h := idempotent.Wrap(store, p.handle, idempotent.WithKey(stepOrderKey), idempotent.WithPrefix("pay"), idempotent.WithClock(clk.Now))
	_, err := h(context.Background(), stepOrder{Key: "k4"})
	require.ErrorIs(t, err, idempotent.ErrStepsChanged)
	assert.Equal(t, [3]int32{0, 0, 0}, p.counts(), "nothing runs on a changed sequence")
	// The record and its step are kept (suspended), not deleted.
	res, err := store.Claim(context.Background(), storage.Record{ID: id, Lease: "probe", Status: storage.StatusInProgress,
		ExpiresAt: clk.Now().Add(time.Hour), LeaseExpiresAt: clk.Now().Add(time.Minute), Version: storage.RecordVersion}, clk.Now())
	require.NoError(t, err)
	require.True(t, res.Claimed)
	require.Len(t, res.Steps, 1)
	assert.Equal(t, "reserve", res.Steps[0].Name)
}

func TestStepDownstreamKeys(t *testing.T) {
	p := &payment{}
	var recordKey string
	h := idempotent.Wrap(idempotent.NewMemoryStore(), func(ctx context.Context, o stepOrder) (string, error) {
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
	e := idempotent.NewEngine(store)
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
			opts := []idempotent.Option{idempotent.WithKey(stepOrderKey), idempotent.WithClock(clk.Now),
				idempotent.WithMaxLease(time.Minute), idempotent.WithTakeoverDelay(tt.delay)}
			crashing := idempotent.Wrap(store, func(ctx context.Context, o stepOrder) (string, error) {
				close(started)
				<-hang // the owner hangs: as far as the record knows, it crashed
				return "", nil
			}, opts...)
			go func() { _, _ = crashing(context.Background(), stepOrder{Key: "k"}) }()
			<-started
			clk.Advance(time.Minute + idempotent.DefaultClockSkew + tt.at)
			other := idempotent.Wrap(store, func(ctx context.Context, o stepOrder) (string, error) { return "ran", nil }, opts...)
			_, err := other(context.Background(), stepOrder{Key: "k"})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
}
