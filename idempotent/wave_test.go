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

// waveStore is the memory store with the many-records capabilities of its
// own (each record's single call in turn), counting every call, and a gate
// that holds completions back while a test looks at what runs meanwhile.
type waveStore struct {
	storage.StepStore
	mu          sync.Mutex
	claims      int                        // single Claims
	claimMany   []int                      // the size of each ClaimMany
	completes   int                        // single Completes
	completeMan []int                      // the size of each CompleteMany
	releases    int                        // single Releases
	releaseMany []int                      // the size of each ReleaseMany
	gate        chan struct{}              // when set, each completion call waits for a value
	entered     chan struct{}              // when set, told of each completion call before it waits
	claimErr    func(storage.Record) error // fails a record's claim in ClaimMany after it landed
}

var (
	_ storage.ClaimManyStore  = (*waveStore)(nil)
	_ storage.FinishManyStore = (*waveStore)(nil)
)

func newWaveStore() *waveStore { return &waveStore{StepStore: idempotent.NewMemoryStore()} }

func (s *waveStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.mu.Lock()
	s.claims++
	s.mu.Unlock()
	return s.StepStore.Claim(ctx, rec, now)
}

func (s *waveStore) ClaimMany(ctx context.Context, recs []storage.Record, now time.Time) ([]storage.ClaimOutcome, error) {
	s.mu.Lock()
	s.claimMany = append(s.claimMany, len(recs))
	s.mu.Unlock()
	out := make([]storage.ClaimOutcome, len(recs))
	for i, rec := range recs {
		out[i].Result, out[i].Err = s.StepStore.Claim(ctx, rec, now)
		if s.claimErr != nil && out[i].Err == nil {
			if err := s.claimErr(rec); err != nil {
				out[i] = storage.ClaimOutcome{Err: err}
			}
		}
	}
	return out, nil
}

func (s *waveStore) wait() {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.gate != nil {
		<-s.gate
	}
}

func (s *waveStore) Complete(ctx context.Context, rec storage.Record) error {
	s.wait()
	s.mu.Lock()
	s.completes++
	s.mu.Unlock()
	return s.StepStore.Complete(ctx, rec)
}

func (s *waveStore) CompleteMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	s.wait()
	s.mu.Lock()
	s.completeMan = append(s.completeMan, len(recs))
	s.mu.Unlock()
	errs := make([]error, len(recs))
	for i, rec := range recs {
		errs[i] = s.StepStore.Complete(ctx, rec)
	}
	return errs, nil
}

func (s *waveStore) Release(ctx context.Context, id, lease string) error {
	s.mu.Lock()
	s.releases++
	s.mu.Unlock()
	return s.StepStore.Release(ctx, id, lease)
}

func (s *waveStore) ReleaseMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	s.mu.Lock()
	s.releaseMany = append(s.releaseMany, len(recs))
	s.mu.Unlock()
	errs := make([]error, len(recs))
	for i, rec := range recs {
		errs[i] = s.StepStore.Release(ctx, rec.ID, rec.Lease)
	}
	return errs, nil
}

// counts returns single claims, ClaimMany sizes, single completes,
// CompleteMany sizes, single releases and ReleaseMany sizes.
func (s *waveStore) counts() (int, []int, int, []int, int, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims, append([]int(nil), s.claimMany...), s.completes, append([]int(nil), s.completeMan...),
		s.releases, append([]int(nil), s.releaseMany...)
}

func calls(keys ...string) []idempotent.Call {
	out := make([]idempotent.Call, len(keys))
	for i, k := range keys {
		out[i] = idempotent.Call{Key: k, Payload: map[string]string{"key": k}}
	}
	return out
}

func work(ran *[]string, mu *sync.Mutex, name string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		mu.Lock()
		*ran = append(*ran, name)
		mu.Unlock()
		return []byte(`"` + name + `"`), nil
	}
}

// The wave claims every distinct record in one ClaimMany before any work
// runs; each Do then costs no claim, a duplicate is answered from the first
// one's record, and a call without a key is answered as Engine.Do answers it.
func TestBatchClaimsInOneWave(t *testing.T) {
	store := newWaveStore()
	var got outcomes
	e := idempotent.New(store, idempotent.WithPrefix("wave"), idempotent.WithOutcomeHook(got.hook))
	ctx := context.Background()
	cs := append(calls("a", "b", "c", "a"), idempotent.Call{})
	b := e.ClaimBatch(ctx, cs)
	claims, many, _, _, _, _ := store.counts()
	assert.Equal(t, 0, claims)
	assert.Equal(t, []int{3}, many, "one ClaimMany of the three distinct records")

	var mu sync.Mutex
	var ran []string
	for i := range 4 {
		res, err := b.Do(ctx, i, work(&ran, &mu, fmt.Sprint(i)))
		require.NoError(t, err, i)
		assert.Equal(t, i < 3, res.Ran, i)
		if i == 3 {
			assert.Equal(t, `"0"`, string(res.Response), "the duplicate replays the first one's response")
			assert.Equal(t, idempotent.RecordID("wave", "", "a"), res.Replay.RecordID)
		}
	}
	_, err := b.Do(ctx, 4, work(&ran, &mu, "4"))
	require.ErrorIs(t, err, idempotent.ErrMissingKey)
	b.Close(ctx)
	assert.Equal(t, []string{"0", "1", "2"}, ran)
	claims, _, completes, completeMany, releases, releaseMany := store.counts()
	assert.Equal(t, 1, claims, "the duplicate's claim, refused by the completed record")
	assert.Equal(t, 3, completes+sum(completeMany), "one completion per record run")
	assert.Zero(t, releases+sum(releaseMany), "nothing to give back")
	assert.ElementsMatch(t, []idempotent.Outcome{idempotent.OutcomeExecuted, idempotent.OutcomeExecuted, idempotent.OutcomeExecuted,
		idempotent.OutcomeReplayed, idempotent.OutcomeRejected}, got.list())
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// A record's completion goes out while the next work runs, and the
// completions that queue up meanwhile are written together; Close waits
// for them, and a duplicate waits for its first one's completion.
func TestBatchCompletionsDoNotHoldTheNextWork(t *testing.T) {
	store := newWaveStore()
	store.gate, store.entered = make(chan struct{}), make(chan struct{}, 2)
	e := idempotent.New(store, idempotent.WithPrefix("wave"))
	ctx := context.Background()
	b := e.ClaimBatch(ctx, calls("a", "b", "c", "a"))
	var mu sync.Mutex
	var ran []string
	for i := range 3 {
		res, err := b.Do(ctx, i, work(&ran, &mu, fmt.Sprint(i)))
		require.NoError(t, err)
		require.True(t, res.Ran)
		if i == 0 {
			<-store.entered // the first completion is in flight, and held
		}
	}
	assert.Equal(t, []string{"0", "1", "2"}, ran, "every work ran while the first completion was held")

	dup := make(chan idempotent.Result, 1)
	go func() {
		res, err := b.Do(ctx, 3, work(&ran, &mu, "3"))
		assert.NoError(t, err)
		dup <- res
	}()
	select {
	case <-dup:
		t.Fatal("the duplicate was answered before its first one's completion landed")
	case <-time.After(50 * time.Millisecond):
	}
	closed := make(chan struct{})
	go func() { b.Close(ctx); close(closed) }()
	store.gate <- struct{}{} // the first completion, alone
	store.gate <- struct{}{} // the two queued meanwhile, together
	res := <-dup
	assert.False(t, res.Ran)
	assert.Equal(t, `"0"`, string(res.Response))
	<-closed
	_, _, completes, completeMany, _, _ := store.counts()
	assert.Equal(t, 1, completes)
	assert.Equal(t, []int{2}, completeMany)
	for _, k := range []string{"a", "b", "c"} {
		_, err := e.Do(ctx, calls(k)[0], func(context.Context) ([]byte, error) { return nil, errors.New("ran again") })
		require.NoError(t, err, "%s is completed", k)
	}
}

// On a store without storage.FinishManyStore (DynamoDB's: many completions
// cost as many calls), each completion goes out as soon as its work returns:
// the completions of calls run side by side are in flight together, not one
// after another, and never more than 32 at once.
func TestBatchCompletionsWithoutFinishMany(t *testing.T) {
	ws := newWaveStore()
	const n, bound = 40, 32
	ws.gate, ws.entered = make(chan struct{}), make(chan struct{}, n)
	store := struct{ storage.StepStore }{ws} // the single calls only
	_, many := any(store).(storage.FinishManyStore)
	require.False(t, many)
	e := idempotent.New(store, idempotent.WithPrefix("wave"))
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	b := e.ClaimBatch(ctx, calls(keys...))
	var mu sync.Mutex
	var ran []string
	for i := range n {
		res, err := b.Do(ctx, i, work(&ran, &mu, keys[i]))
		require.NoError(t, err)
		require.True(t, res.Ran)
	}
	for i := range bound {
		select {
		case <-ws.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d completions in flight at once, want %d: they wait for each other", i, bound)
		}
	}
	select {
	case <-ws.entered:
		t.Fatalf("more than %d completions in flight at once", bound)
	case <-time.After(50 * time.Millisecond):
	}
	closed := make(chan struct{})
	go func() { b.Close(ctx); close(closed) }()
	for range n {
		ws.gate <- struct{}{}
	}
	<-closed
	_, _, completes, completeMany, _, _ := ws.counts()
	assert.Equal(t, n, completes)
	assert.Empty(t, completeMany)
}

// Close gives back, in one ReleaseMany, every claim no call ran, so that the
// next invocation runs those records at once.
func TestBatchCloseGivesBackWhatDidNotRun(t *testing.T) {
	store := newWaveStore()
	e := idempotent.New(store, idempotent.WithPrefix("wave"))
	ctx := context.Background()
	b := e.ClaimBatch(ctx, calls("a", "b", "c"))
	var mu sync.Mutex
	var ran []string
	_, err := b.Do(ctx, 0, work(&ran, &mu, "0"))
	require.NoError(t, err)
	b.Close(ctx)
	_, _, _, _, releases, releaseMany := store.counts()
	assert.Zero(t, releases)
	assert.Equal(t, []int{2}, releaseMany)

	next := e.ClaimBatch(ctx, calls("a", "b", "c"))
	for i := range 3 {
		res, err := next.Do(ctx, i, work(&ran, &mu, fmt.Sprint("again ", i)))
		require.NoError(t, err)
		assert.Equal(t, i > 0, res.Ran, "b and c run at once; a replays")
	}
	next.Close(ctx)
	assert.Equal(t, []string{"0", "again 1", "again 2"}, ran)
}

// A claim of the wave whose answer was lost (it landed) is claimed again,
// as its owner's: the work runs once, not "in progress" until the lease ends.
func TestBatchUnknownClaimIsClaimedAgainAsItsOwner(t *testing.T) {
	store := newWaveStore()
	store.claimErr = func(storage.Record) error { return errors.New("connection reset") }
	e := idempotent.New(store, idempotent.WithPrefix("wave"))
	ctx := context.Background()
	b := e.ClaimBatch(ctx, calls("a", "b"))
	var mu sync.Mutex
	var ran []string
	res, err := b.Do(ctx, 0, work(&ran, &mu, "0"))
	require.NoError(t, err)
	assert.True(t, res.Ran)
	b.Close(ctx) // b's claim landed too, and is given back
	_, _, _, _, releases, releaseMany := store.counts()
	assert.Equal(t, 1, releases+sum(releaseMany))
	res, err = e.Do(ctx, calls("b")[0], work(&ran, &mu, "b"))
	require.NoError(t, err)
	assert.True(t, res.Ran, "b was given back")
	assert.Equal(t, []string{"0", "b"}, ran)
}

// A claim whose lease ends too soon for its call (a maximum lease shorter
// than the batch takes) is given back and claimed afresh before it runs.
func TestBatchStaleClaimIsRenewed(t *testing.T) {
	store := newWaveStore()
	e := idempotent.New(store, idempotent.WithPrefix("wave"), idempotent.WithMaxLease(time.Second))
	ctx := context.Background()
	b := e.ClaimBatch(ctx, calls("a", "b"))
	var mu sync.Mutex
	var ran []string
	var deadlines []time.Duration
	run := func(name string) func(context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			d, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, time.Until(d))
			return work(&ran, &mu, name)(ctx)
		}
	}
	_, err := b.Do(ctx, 0, run("0"))
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond) // the wave's claims leave b 350 ms of its 750
	_, err = b.Do(ctx, 1, run("1"))
	require.NoError(t, err)
	b.Close(ctx)
	claims, _, _, _, releases, _ := store.counts()
	assert.Equal(t, 1, claims, "b claimed afresh")
	assert.Equal(t, 1, releases, "after its stale claim was given back")
	require.Len(t, deadlines, 2)
	assert.Greater(t, deadlines[1], 500*time.Millisecond, "b ran with a fresh lease")
}

// With the Engine disabled, the wave claims nothing and every call runs.
func TestBatchDisabled(t *testing.T) {
	t.Setenv("IDEMKIT_DISABLED", "1")
	store := newWaveStore()
	e := idempotent.New(store, idempotent.WithPrefix("wave"))
	ctx := context.Background()
	b := e.ClaimBatch(ctx, calls("a", "a"))
	var mu sync.Mutex
	var ran []string
	for i := range 2 {
		res, err := b.Do(ctx, i, work(&ran, &mu, fmt.Sprint(i)))
		require.NoError(t, err)
		assert.True(t, res.Ran)
	}
	b.Close(ctx)
	claims, many, completes, completeMany, _, _ := store.counts()
	assert.Zero(t, claims+sum(many)+completes+sum(completeMany))
	assert.Equal(t, []string{"0", "1"}, ran)
}
