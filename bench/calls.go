package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// callsResult is the measured cost of one scenario.
type callsResult struct {
	Scenario string
	Target   int
	Outcome  string   // the outcome the scenario must produce
	Calls    []int    // API calls per repetition
	Attempts []int    // HTTP requests per repetition
	Ops      []string // the operations of the first repetition
	Problem  string   // why the scenario failed, if it did
}

func (r callsResult) ok() bool {
	if r.Problem != "" || len(r.Calls) == 0 {
		return false
	}
	for _, c := range r.Calls {
		if c != r.Target {
			return false
		}
	}
	return true
}

// fakeClock is the wrappers' clock in the calls scenarios: real time plus an
// offset the lease-takeover scenario advances, so no scenario sleeps.
type fakeClock struct{ offset atomic.Int64 }

func (c *fakeClock) now() time.Time            { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *fakeClock) advance(d time.Duration)   { c.offset.Add(int64(d)) }
func (c *fakeClock) option() idempotent.Option { return idempotent.WithClock(c.now) }

// outcomeLog keeps the last outcome reported under each invocation's calls
// counter, so each scenario checks what happened, not only what it cost.
type outcomeLog struct {
	mu    sync.Mutex
	byKey map[string]idempotent.Event
}

type scenarioKey struct{}

func newOutcomeLog() *outcomeLog                { return &outcomeLog{byKey: map[string]idempotent.Event{}} }
func (l *outcomeLog) option() idempotent.Option { return idempotent.WithOutcomeHook(l.hook) }

func (l *outcomeLog) hook(ctx context.Context, ev idempotent.Event) {
	if k, ok := ctx.Value(scenarioKey{}).(string); ok {
		l.mu.Lock()
		l.byKey[k] = ev
		l.mu.Unlock()
	}
}

func (l *outcomeLog) get(k string) (idempotent.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev, ok := l.byKey[k]
	return ev, ok
}

// blockingHandler runs chargeHandler, but an event whose key is in block
// first signals started and waits for its release channel, and one whose key
// is in fail returns an error: the in-progress, takeover and error scenarios.
type blockingHandler struct {
	mu      sync.Mutex
	block   map[string]chan struct{}
	started map[string]chan struct{}
	fail    map[string]bool
}

func (b *blockingHandler) handle(ctx context.Context, e paymentEvent) (paymentResult, error) {
	b.mu.Lock()
	release, blocked := b.block[e.IdempotencyKey]
	started := b.started[e.IdempotencyKey]
	fail := b.fail[e.IdempotencyKey]
	delete(b.block, e.IdempotencyKey)
	b.mu.Unlock()
	if blocked {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	if fail {
		return paymentResult{}, errors.New("card declined")
	}
	return chargeHandler(ctx, e)
}

func (b *blockingHandler) blockKey(key string) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	b.mu.Lock()
	b.block[key], b.started[key] = release, started
	b.mu.Unlock()
	return started, release
}

// stepsHandler takes three steps (idempotent.Step) before it charges; an
// event whose key is in stall signals started after the second step and
// waits for release: the steps scenarios of §1.
type stepsHandler struct {
	mu    sync.Mutex
	stall map[string][2]chan struct{}
}

var stepNames = [...]string{"reserve", "charge", "notify"}

func (s *stepsHandler) handle(ctx context.Context, e paymentEvent) (paymentResult, error) {
	for i, name := range stepNames {
		if _, err := idempotent.Step(ctx, name, func(context.Context) (int, error) { return i, nil }); err != nil {
			return paymentResult{}, err
		}
		if i != 1 {
			continue
		}
		s.mu.Lock()
		st, stalled := s.stall[e.IdempotencyKey]
		delete(s.stall, e.IdempotencyKey)
		s.mu.Unlock()
		if stalled {
			close(st[0])
			select {
			case <-st[1]:
			case <-ctx.Done():
			}
		}
	}
	return chargeHandler(ctx, e)
}

func (s *stepsHandler) stallKey(key string) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	s.mu.Lock()
	s.stall[key] = [2]chan struct{}{started, release}
	s.mu.Unlock()
	return started, release
}

// inv is one measured invocation (or group of invocations).
type inv struct {
	calls  *calls
	ev     idempotent.Event
	err    error
	logged bool
}

// duplicatesAtOnce is the size of the coalescing scenarios of §1.
const duplicatesAtOnce = 16

// concurrent starts duplicatesAtOnce invocations of one new key in one
// process (one wrapper) at once, all counted under one calls counter. The
// first to claim is held for a moment, so that every other one meets it in
// the air; each of the others must report followers (replayed with Shared, or
// in_progress) and the first executed. The result carries the first's event.
func concurrent(ctx context.Context, f func(context.Context, paymentEvent) (paymentResult, error), bh *blockingHandler,
	tmpl paymentEvent, key string, outcomes *outcomeLog, followers string) (inv, string) {
	c := &calls{names: []string{}}
	started, release := bh.blockKey(key)
	go func() {
		<-started
		time.Sleep(200 * time.Millisecond) // every other invocation is in flight by now
		close(release)
	}()
	ev := tmpl
	ev.IdempotencyKey = key
	tags := make([]string, duplicatesAtOnce)
	errs := make([]error, duplicatesAtOnce)
	var wg sync.WaitGroup
	for n := range duplicatesAtOnce {
		tags[n] = key + "/" + randomHex(4)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ictx, cancel := context.WithTimeout(withCalls(context.WithValue(ctx, scenarioKey{}, tags[n]), c), 30*time.Second)
			defer cancel()
			_, errs[n] = f(ictx, ev)
		}()
	}
	wg.Wait()
	var first inv
	counts := map[string]int{}
	for n, tag := range tags {
		e, ok := outcomes.get(tag)
		if !ok {
			return inv{calls: c}, "an invocation reported no outcome"
		}
		switch {
		case e.Outcome.String() == "executed" && first.calls == nil:
			first = inv{calls: c, ev: e, err: errs[n], logged: true}
		case e.Outcome.String() == followers && (followers != "replayed" || e.Shared):
			counts[followers]++
		default:
			return inv{calls: c}, fmt.Sprintf("an invocation's outcome: %s (shared %v, err %v)", e.Outcome, e.Shared, errs[n])
		}
	}
	if first.calls == nil {
		return inv{calls: c}, "no invocation executed"
	}
	if counts[followers] != duplicatesAtOnce-1 {
		return first, fmt.Sprintf("%d of %d duplicates %s, want all", counts[followers], duplicatesAtOnce-1, followers)
	}
	return first, ""
}

// runCalls measures the DynamoDB calls of each scenario reps times, against
// table, each repetition with its own keys.
func runCalls(ctx context.Context, client *dynamodb.Client, table string, tmpl paymentEvent, reps int) []callsResult {
	const maxLease = 10 * time.Second
	clock := &fakeClock{}
	outcomes := newOutcomeLog()
	bh := &blockingHandler{block: map[string]chan struct{}{}, started: map[string]chan struct{}{}, fail: map[string]bool{}}
	store := dynamostore.New(client, table)
	opts := []idempotent.Option{
		idempotent.WithPrefix("calls"), idempotent.WithExpiry(time.Hour),
		idempotent.WithMaxLease(maxLease), idempotent.WithLogger(slog.New(slog.DiscardHandler)),
		clock.option(), outcomes.option(),
	}
	withKey := idempotent.WithKey(eventKey)
	h := idempotent.Wrap(idempotent.New(store, opts...), bh.handle, withKey)
	other := idempotent.Wrap(idempotent.New(store, opts...), bh.handle, withKey) // another process: its own engine, no coalescing with h
	cached := idempotent.Wrap(idempotent.New(store, append(slices.Clone(opts), idempotent.WithLocalCache(1024))...), bh.handle, withKey)
	waiting := idempotent.Wrap(idempotent.New(store, append(slices.Clone(opts), idempotent.WithWaitInProgress(30*time.Second))...), bh.handle, withKey)
	sh := &stepsHandler{stall: map[string][2]chan struct{}{}}
	stepped := idempotent.Wrap(idempotent.New(store, opts...), sh.handle, withKey)
	steppedOther := idempotent.Wrap(idempotent.New(store, opts...), sh.handle, withKey) // the process that takes over

	run := "c" + randomHex(6)
	// invoke calls f with key, counting the calls made under its context.
	invoke := func(f func(context.Context, paymentEvent) (paymentResult, error), key string) inv {
		c := &calls{names: []string{}}
		tag := key + "/" + randomHex(4)
		ictx, cancel := context.WithTimeout(withCalls(context.WithValue(ctx, scenarioKey{}, tag), c), 30*time.Second)
		defer cancel()
		ev := tmpl
		ev.IdempotencyKey = key
		_, err := f(ictx, ev)
		e, ok := outcomes.get(tag)
		return inv{calls: c, ev: e, err: err, logged: ok}
	}

	type scenario struct {
		name, outcome string
		target        int
		// run performs the scenario's set-up and returns the measured invocation.
		run func(key string) (inv, string)
	}
	expect := func(i inv, outcome string, tookOver, fromCache bool) string {
		switch {
		case !i.logged:
			return "no outcome reported"
		case i.ev.Outcome.String() != outcome:
			return fmt.Sprintf("outcome %s (err %v), want %s", i.ev.Outcome, i.err, outcome)
		case i.ev.TookOver != tookOver:
			return fmt.Sprintf("TookOver=%v, want %v", i.ev.TookOver, tookOver)
		case i.ev.FromCache != fromCache:
			return fmt.Sprintf("FromCache=%v, want %v", i.ev.FromCache, fromCache)
		}
		return ""
	}
	// inProgress holds key's first invocation (through h) in its handler
	// and measures a duplicate through dup.
	inProgress := func(dup func(context.Context, paymentEvent) (paymentResult, error), key string) (inv, string) {
		started, release := bh.blockKey(key)
		done := make(chan inv)
		go func() { done <- invoke(h, key) }()
		<-started
		i := invoke(dup, key)
		close(release)
		first := <-done
		if p := expect(first, "executed", false, false); p != "" {
			return i, "the first invocation: " + p
		}
		return i, expect(i, "in_progress", false, false)
	}
	scenarios := []scenario{
		{"new key", "executed", 2, func(key string) (inv, string) {
			i := invoke(h, key)
			return i, expect(i, "executed", false, false)
		}},
		{"replay (completed record)", "replayed", 1, func(key string) (inv, string) {
			invoke(h, key)
			i := invoke(h, key)
			return i, expect(i, "replayed", false, false)
		}},
		{"replay with the local cache", "replayed", 0, func(key string) (inv, string) {
			invoke(cached, key)
			i := invoke(cached, key)
			return i, expect(i, "replayed", false, true)
		}},
		{"in-progress duplicate (another process)", "in_progress", 1, func(key string) (inv, string) {
			return inProgress(other, key)
		}},
		{"in-progress duplicate (same process)", "in_progress", 0, func(key string) (inv, string) {
			return inProgress(h, key)
		}},
		{"16 concurrent duplicates of a new key, one process, WithWaitInProgress (all 16)", "executed", 2, func(key string) (inv, string) {
			return concurrent(ctx, waiting, bh, tmpl, key, outcomes, "replayed")
		}},
		{"16 concurrent duplicates of a new key, one process, no waiting (all 16)", "executed", 2, func(key string) (inv, string) {
			return concurrent(ctx, h, bh, tmpl, key, outcomes, "in_progress")
		}},
		{"handler error (release)", "handler_error", 2, func(key string) (inv, string) {
			bh.mu.Lock()
			bh.fail[key] = true
			bh.mu.Unlock()
			i := invoke(h, key)
			return i, expect(i, "handler_error", false, false)
		}},
		{"lease takeover", "executed", 2, func(key string) (inv, string) {
			// The owner claims and stalls; the clock moves past its lease
			// (maximum lease + clock skew margin); a retry takes over. The
			// owner's completion is then fenced off (its calls are not the
			// retry's).
			started, release := bh.blockKey(key)
			done := make(chan inv)
			go func() { done <- invoke(h, key) }()
			<-started
			clock.advance(maxLease + (2 * time.Second) + time.Second)
			i := invoke(h, key)
			close(release)
			owner := <-done
			if p := expect(owner, "lease_lost", false, false); p != "" {
				return i, "the stalled owner: " + p
			}
			return i, expect(i, "executed", true, false)
		}},
		{"new key with 3 steps", "executed", 5, func(key string) (inv, string) {
			i := invoke(stepped, key)
			return i, expect(i, "executed", false, false)
		}},
		{"takeover after step 2 of 3 (steps resumed)", "executed", 4, func(key string) (inv, string) {
			// The owner records two steps and stalls; past its lease a
			// retry in another process takes over: its claim (a PutItem,
			// refused by the record's steps) and a second PutItem that
			// keeps them bring the two steps back, so it records only the
			// third and completes. One call more than a claim that kept
			// the steps itself (3), on purpose: the claim is the design's
			// PutItem, and resumes are rare.
			started, release := sh.stallKey(key)
			done := make(chan inv)
			go func() { done <- invoke(stepped, key) }()
			<-started
			clock.advance(maxLease + (2 * time.Second) + time.Second)
			i := invoke(steppedOther, key)
			close(release)
			owner := <-done
			if owner.err == nil {
				return i, "the stalled owner: succeeded, want its third step fenced off"
			}
			return i, expect(i, "executed", true, false)
		}},
	}

	var results []callsResult
	for _, s := range scenarios {
		r := callsResult{Scenario: s.name, Target: s.target, Outcome: s.outcome}
		for rep := range reps {
			i, problem := s.run(fmt.Sprintf("%s-%s-%d", run, strings.ReplaceAll(s.name, " ", "_"), rep))
			if problem != "" && r.Problem == "" {
				r.Problem = problem
			}
			r.Calls = append(r.Calls, int(i.calls.ops.Load()))
			r.Attempts = append(r.Attempts, int(i.calls.attempts.Load()))
			if rep == 0 {
				r.Ops = slices.Clone(i.calls.names)
			}
		}
		results = append(results, r)
	}
	return results
}
