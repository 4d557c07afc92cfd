package modelcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

// input is the wrapped handler's input: the key and the payload that is
// fingerprinted.
type input struct{ Key, Payload string }

var errHandler = errors.New("modelcheck: handler failed")

// waitLimit bounds every wait for an invocation to reach a stable point; a
// wrapper that hangs fails the check instead of the whole test binary.
const waitLimit = time.Minute

// horizon bounds the injected clock: 200 years past the start, below the
// year 2262 where int64 nanoseconds end, so any model time saturated there
// is "never" for the whole check.
const horizon = 200 * 365 * 24 * time.Hour

// Option values, the first of each list the one rapid shrinks towards.
var (
	maxLeases = []time.Duration{(15 * time.Minute), time.Second, 0, 90 * time.Second, time.Hour,
		math.MaxInt64, math.MaxInt64 - 999_999, 1 << 62}
	skews    = []time.Duration{(2 * time.Second), 0, -time.Second, time.Millisecond, time.Minute, math.MaxInt64}
	expiries = []time.Duration{time.Hour, 0, time.Second, time.Minute, 24 * time.Hour, math.MaxInt64}
	// Deadlines lie well past a check's real duration: the handler's context
	// runs on the real clock and must not end while a step waits on it.
	deadlines = []deadline{
		{"none", nil},
		{"+2m", func(t time.Time) time.Time { return t.Add(2 * time.Minute) }},
		{"+1h", func(t time.Time) time.Time { return t.Add(time.Hour) }},
		{"+100y", func(t time.Time) time.Time { return t.AddDate(100, 0, 0) }},
		{"+1000y", func(t time.Time) time.Time { return t.AddDate(1000, 0, 0) }},
	}
	jumps = []struct {
		name string
		d    time.Duration
	}{
		{"1ms", time.Millisecond}, {"1s", time.Second}, {"1m", time.Minute}, {"1h", time.Hour},
		{"1d", 24 * time.Hour}, {"1y", 365 * 24 * time.Hour}, {"50y", 50 * 365 * 24 * time.Hour},
	}
)

// drawFault draws a store fault, none most of the time.
func drawFault(t *rapid.T, label string) fault {
	switch rapid.IntRange(0, 5).Draw(t, label) {
	case 4:
		return faultBefore
	case 5:
		return faultAfter
	}
	return faultNone
}

type expectKind int

const (
	expectNothing    expectKind = iota // no claim seen yet
	expectRun                          // claimed: the handler runs and the caller gets its result
	expectReplay                       // a completed record for this payload: its response
	expectInProgress                   // a live lease for this payload
	expectMismatch                     // a live record for another payload
	expectStoreError                   // the claim failed (or its answer was lost)
)

type handlerCmd struct {
	fail  bool
	abort bool // a tx wrapper's handler adds a write that fails
	value string
}

// deadline is a drawn deadline of an invocation's context.
type deadline struct {
	name string
	at   func(time.Time) time.Time // nil: none
}

// invocation is one call of a wrapped handler, run in its own goroutine.
type invocation struct {
	id, key, payload int
	w                *wrapperUnderTest
	dl               deadline
	claimFault       fault     // the faults planned for its claim, and for
	forgetFault      fault     // the release that gives back a claim whose answer was lost
	deadline         time.Time // zero: the context has none
	realBefore       time.Time

	entered, done chan struct{}
	cmd           chan handlerCmd
	ran           bool  // written by the handler before entered is closed
	stepRan       bool  // its step's function ran (written before entered is closed)
	stepErr       error // its step's error
	txErr         error // a tx wrapper's: adding its writes failed (written before done is closed)
	out           string
	err           error         // out, err and took are written before done is closed
	took          time.Duration // real time the call took

	// Model state.
	running bool   // its handler has entered and not returned
	crashed bool   // its process died: its later writes are dropped
	value   string // the response its handler returned
	failed  bool   // its handler returned an error
	lease   string
	span    *span         // its claim's lease end
	minRun  time.Duration // the least real time its claim gives its handler
	expect  expectKind
	replay  string       // expectReplay: the response
	via     string       // how its wrapper answered it without the store, if it did
	resumed bool         // its claim kept the step of the record it took over
	holds   bool         // its record holds a step: a failed run suspends, not releases
	abort   bool         // a tx wrapper's handler added a failing write
	commit  *observation // a tx wrapper's: its transaction's commit, once made
	// giveBack is a tx wrapper's release or suspend after its commit: the
	// settle of an unknown outcome, or the give-back after an abort.
	giveBack *observation
}

// from names the way an answer came without the store, for messages.
func (inv *invocation) from() string {
	if inv.via == "" {
		return ""
	}
	return " (" + inv.via + ")"
}

type invPtrKey struct{}

// wrapperUnderTest is one Wrap call on an Engine of its own, so one process. Its
// calls for one key coalesce (idempotent/coalesce.go); calls of different
// wrappers meet only in the store.
type wrapperUnderTest struct {
	idx   int
	name  string
	opts  options
	steps bool // its handler takes a step on entry (idempotent.Step)
	tx    bool // its handler adds a write to its run's transaction when it returns
	fn    func(context.Context, input) (string, error)
}

// flightKey names the flight of one wrapper for one key: the call of that
// wrapper (that process) that leads the key.
type flightKey struct{ w, key int }

// machine is the rapid state machine: the system under test (wrappers over
// one faultStore, an injected clock) and the model.
type machine struct {
	store    *faultStore
	clock    atomic.Int64 // the injected clock's now, ns
	start    int64        // where it started, ns
	end      int64        // its horizon, ns
	keys     int
	wrappers []*wrapperUnderTest
	recs     []*record // per key; nil: no record
	invs     []*invocation
	// flights is the model of the wrappers' in-process coalescing: per
	// wrapper and key, the call that leads its wrapper's flight and holds the
	// key's lease (its claim succeeded and its handler runs). Between steps
	// no claim is in flight, so these are the only flights there are.
	flights map[flightKey]*invocation
	gate    *gate // Race's held claim, opened by stop if a step fails
	stats   *stats
	writes  storetest.TxWrites // the store's writes, when it is a storage.TxStore
	prefix  string
}

func newMachine(t *rapid.T, inner storage.StepStore, writes storetest.TxWrites, prefix string, st *stats) *machine {
	m := &machine{store: newFaultStore(inner), flights: map[flightKey]*invocation{}, stats: st, writes: writes, prefix: prefix}
	var store storage.Store = m.store
	if writes != nil {
		store = faultTxStore{m.store}
	}
	m.keys = rapid.IntRange(2, 3).Draw(t, "keys")
	m.recs = make([]*record, m.keys)
	// The injected clock starts ahead of the real one and only moves
	// forward, so Redis and DynamoDB Local, which expire keys by the real
	// clock, never drop a record the model holds.
	start := time.Now().Add(10 * time.Second).Truncate(time.Second).UnixNano()
	m.clock.Store(start)
	m.start, m.end = start, start+int64(horizon)
	now := func() time.Time { return time.Unix(0, m.clock.Load()) }
	// At least two wrappers, so that calls for one key meet both in one
	// process (a wrapper's flight) and across processes (the store).
	for i := range rapid.IntRange(2, 3).Draw(t, "wrappers") {
		o := options{
			maxLease: rapid.SampledFrom(maxLeases).Draw(t, "maxLease"),
			skew:     rapid.SampledFrom(skews).Draw(t, "clockSkew"),
			expiry:   rapid.SampledFrom(expiries).Draw(t, "expiry"),
		}
		w := &wrapperUnderTest{idx: i, name: fmt.Sprintf("w%d", i), opts: o, steps: rapid.Bool().Draw(t, "steps")}
		if writes != nil {
			w.tx = rapid.Bool().Draw(t, "tx")
		}
		e := idempotent.New(store,
			idempotent.WithPrefix(prefix),
			idempotent.WithClock(now),
			idempotent.WithMaxLease(o.maxLease),
			idempotent.WithClockSkew(o.skew),
			idempotent.WithExpiry(o.expiry),
			idempotent.WithLogger(slog.New(slog.DiscardHandler)),
		)
		w.fn = idempotent.Wrap(e, m.handler,
			idempotent.WithKey(func(in input) (string, error) { return in.Key, nil }),
			idempotent.WithPayloadValidation(func(in input) (any, error) { return in.Payload, nil }),
		)
		m.wrappers = append(m.wrappers, w)
		t.Logf("%s: %v, steps: %v, tx: %v", w.name, o, w.steps, w.tx)
	}
	t.Cleanup(m.stop)
	return m
}

// handler takes its wrapper's step, if it has one, then blocks until the
// step that finishes its invocation says how.
func (m *machine) handler(ctx context.Context, _ input) (string, error) {
	inv := ctx.Value(invPtrKey{}).(*invocation)
	inv.ran = true
	if inv.w.steps {
		_, inv.stepErr = idempotent.Step(ctx, "effect", func(context.Context) (int, error) {
			inv.stepRan = true // the step's side effect
			return inv.id, nil
		})
	}
	close(inv.entered)
	c := <-inv.cmd
	if inv.w.tx {
		inv.txErr = m.addWrites(ctx, inv, c.abort)
	}
	if c.fail {
		return "", errHandler
	}
	return c.value, nil
}

// stop ends the handlers still blocked when a check ends (or fails).
func (m *machine) stop() {
	if m.gate != nil {
		m.gate.open()
	}
	for _, inv := range m.invs {
		select {
		case <-inv.entered:
			inv.cmd <- handlerCmd{fail: true}
		case <-inv.done:
		}
		select {
		case <-inv.done:
		case <-time.After(waitLimit): // a hung wrapper already failed its step
		}
	}
}

func (m *machine) now() int64 { return m.clock.Load() }

// Times are shown from the start of the injected clock, so that a failure's
// message is the same in every run of its steps (rapid shrinks only while
// the failure stays the same).
func (m *machine) at(ns int64) string {
	if ns > m.end {
		return "never"
	}
	return "T+" + time.Duration(ns-m.start).String()
}

func (m *machine) nowString() string { return m.at(m.now()) }

// spanString shows a lease end; one measured on the real clock is rounded to
// the second, as its milliseconds differ from run to run.
func (m *machine) spanString(s *span) string {
	at := func(ms int64) string {
		ns := satMul(ms, 1e6)
		if s.approx && ns <= m.end {
			return "about " + m.at(m.start+(ns-m.start+5e8)/1e9*1e9)
		}
		return m.at(ns)
	}
	if s.lo == s.hi {
		return at(s.lo)
	}
	return fmt.Sprintf("[%s, %s]", at(s.lo), at(s.hi))
}

func (m *machine) describe(r *record) string {
	if r == nil {
		return "no record"
	}
	s := fmt.Sprintf("%s record of #%d for payload-%d, expiring ", r.status, r.owner, r.payload)
	if r.expLo == r.expHi {
		s += m.at(satMul(r.expLo, 1e9))
	} else {
		s += fmt.Sprintf("in [%s, %s]", m.at(satMul(r.expLo, 1e9)), m.at(satMul(r.expHi, 1e9)))
	}
	if r.status == storage.StatusInProgress {
		return s + ", lease ending " + m.spanString(r.span)
	}
	return s + fmt.Sprintf(", response %q", r.resp)
}

// Check runs after every step: the injected clock stays well ahead of the
// real one (a check that ran unusually long moves it), so that a record's
// expiry, at least a second past the injected now, is never in the real
// past when a step writes it.
func (m *machine) Check(t *rapid.T) {
	if real := time.Now(); m.now() < real.Add(5*time.Second).UnixNano() {
		m.clock.Store(real.Add(10 * time.Second).Truncate(time.Millisecond).UnixNano())
		t.Logf("clock moved to %s to stay ahead of the real clock", m.nowString())
	}
}

// Start begins an invocation and waits until its handler has entered or
// the call has returned. Half the time a handler runs, the call is for the
// key of one that runs: a duplicate, in the same process (its wrapper's
// flight) or in another (the store).
func (m *machine) Start(t *rapid.T) {
	w := m.wrappers[rapid.IntRange(0, len(m.wrappers)-1).Draw(t, "wrapper")]
	var key int
	if running := m.running(); len(running) > 0 && rapid.IntRange(0, 1).Draw(t, "duplicate") == 1 {
		key = running[rapid.IntRange(0, len(running)-1).Draw(t, "of")].key
	} else {
		key = rapid.IntRange(0, m.keys-1).Draw(t, "key")
	}
	inv := m.newInvocation(t, w, key)
	m.launch(inv, nil, false)
	m.settle(t, inv)
	obs := m.store.take()
	m.store.clear(inv.id)
	t.Logf("%s: %v -> %s", m.title(inv), obs, result(inv))
	m.land(t, inv, obs, nil)
}

// raceSettle bounds the wait for a duplicate to block on the flight it
// follows; past it, Race checks the duplicate as if it might not have.
const raceSettle = 250 * time.Millisecond

// Race starts two calls of one wrapper for one key at once: the second
// while the first's claim is in flight (held at the store). The second must
// wait for the first's claim to be answered, without a store call of its
// own, and then gets what the coalescing rules give it: an answer from the
// first's flight (ErrInProgress or ErrPayloadMismatch while the first holds
// the lease, the first's replay when that is for its payload), or its own
// way to the store.
func (m *machine) Race(t *rapid.T) {
	w := m.wrappers[rapid.IntRange(0, len(m.wrappers)-1).Draw(t, "wrapper")]
	key := rapid.IntRange(0, m.keys-1).Draw(t, "key")
	if l := m.flights[flightKey{w.idx, key}]; l != nil && l.span.lapsed(m.now()) != yes {
		t.Skip("a call of that wrapper may hold that key's lease: a first call would not go to the store")
	}
	a := m.newInvocation(t, w, key)
	b := m.newInvocation(t, w, key)
	m.gate = m.launch(a, nil, true)
	arrived := false
	select {
	case <-m.gate.arrived:
		arrived = true
	case <-a.done: // land(a) tells why it never reached the store
	case <-time.After(waitLimit):
		t.Fatalf("#%d: its claim did not reach the store within %v", a.id, waitLimit)
	}
	seen, early := false, false
	if arrived {
		waiting := make(chan struct{})
		m.launch(b, func(ctx context.Context) context.Context { return &doneSpy{Context: ctx, called: waiting} }, false)
		select {
		case <-waiting:
			seen = true
		case <-b.done:
		case <-time.After(raceSettle):
		}
		early = isDone(b)
	}
	m.gate.open()
	m.gate = nil
	if !arrived {
		m.store.unhold()
		m.launch(b, nil, false)
	}
	m.settle(t, a)
	m.settle(t, b)
	obs := m.store.take()
	m.store.clear(a.id)
	m.store.clear(b.id)
	var aObs, bObs []observation
	for _, o := range obs {
		if o.inv == a.id {
			aObs = append(aObs, o)
		} else {
			bObs = append(bObs, o)
		}
	}
	t.Logf("%s, its claim held in flight: %v -> %s", m.title(a), aObs, result(a))
	t.Logf("%s, started meanwhile (seen waiting on the flight: %v): %v -> %s", m.title(b), seen, bObs, result(b))
	lastA := -1
	for i, o := range obs {
		if o.inv == a.id {
			lastA = i
		}
	}
	for i, o := range obs {
		switch {
		case o.inv != b.id:
		case o.during == a.id:
			t.Fatalf("coalescing rule violated: %v went to the store while the claim of #%d, which leads %s's flight for key-%d, was in flight",
				o, a.id, w.name, key)
		case i < lastA:
			t.Fatalf("coalescing rule violated: %v went to the store before #%d, which leads %s's flight for key-%d, had its answer",
				o, a.id, w.name, key)
		}
	}
	if arrived && early {
		t.Fatalf("coalescing rule violated: #%d got (%q, %v) while the claim of #%d, which leads %s's flight for key-%d, was still in flight",
			b.id, b.out, b.err, a.id, w.name, key)
	}
	m.stats.races.Add(1)
	if seen && !early {
		m.stats.waited.Add(1)
	}
	m.land(t, a, aObs, nil)
	var share *sharedReplay
	if isDone(a) && a.expect == expectReplay {
		share = &sharedReplay{leader: a, resp: a.replay, waiting: seen && !early}
	}
	m.land(t, b, bObs, share)
}

// doneSpy tells when a call first asks its context for the Done channel: a
// duplicate that waits on its wrapper's flight blocks on it (and on the
// flight), so Race knows the duplicate is waiting there.
type doneSpy struct {
	context.Context
	once   sync.Once
	called chan struct{}
}

func (c *doneSpy) Done() <-chan struct{} {
	c.once.Do(func() { close(c.called) })
	return c.Context.Done()
}

// newInvocation draws a call of w for key: its payload, its deadline and
// the faults of its claim (and of the release that gives back a claim whose
// answer was lost).
func (m *machine) newInvocation(t *rapid.T, w *wrapperUnderTest, key int) *invocation {
	inv := &invocation{
		key:     key,
		payload: rapid.IntRange(0, 1).Draw(t, "payload"),
		w:       w,
		dl:      deadlines[rapid.IntRange(0, len(deadlines)-1).Draw(t, "deadline")],
		entered: make(chan struct{}),
		done:    make(chan struct{}),
		cmd:     make(chan handlerCmd, 1),
	}
	inv.claimFault = drawFault(t, "claimFault")
	if inv.claimFault != faultNone {
		// The wrapper gives back a claim whose answer it did not get.
		inv.forgetFault = drawFault(t, "forgetFault")
	}
	return inv
}

// launch numbers inv, plans its faults and calls its wrapper in a goroutine
// of its own; wrap, if set, wraps the call's context. With hold, its claim
// waits at the store's gate, which it returns. (Nothing is drawn here: a
// draw that ends a run must never leave an invocation that was never
// called, which stop would wait for.)
func (m *machine) launch(inv *invocation, wrap func(context.Context) context.Context, hold bool) *gate {
	inv.id = len(m.invs)
	m.invs = append(m.invs, inv)
	m.store.plan(inv.id, opClaim, inv.claimFault)
	if inv.claimFault != faultNone {
		m.store.plan(inv.id, opRelease, inv.forgetFault)
	}
	var g *gate
	if hold {
		g = m.store.hold(inv.id)
	}
	ctx := context.WithValue(context.WithValue(context.Background(), invKey{}, inv.id), invPtrKey{}, inv)
	cancel := context.CancelFunc(func() {})
	inv.realBefore = time.Now()
	if inv.dl.at != nil {
		inv.deadline = inv.dl.at(inv.realBefore)
		ctx, cancel = context.WithDeadline(ctx, inv.deadline)
	}
	if wrap != nil {
		ctx = wrap(ctx)
	}
	in := input{Key: fmt.Sprintf("key-%d", inv.key), Payload: fmt.Sprintf("payload-%d", inv.payload)}
	go func() {
		defer close(inv.done)
		defer cancel()
		inv.out, inv.err = inv.w.fn(ctx, in)
		inv.took = time.Since(inv.realBefore)
	}()
	return g
}

// settle waits until inv's handler has entered or its call has returned.
func (m *machine) settle(t *rapid.T, inv *invocation) {
	select {
	case <-inv.entered:
	case <-inv.done:
	case <-time.After(waitLimit):
		t.Fatalf("#%d: neither entered its handler nor returned within %v", inv.id, waitLimit)
	}
}

func isDone(inv *invocation) bool {
	select {
	case <-inv.done:
		return true
	default:
		return false
	}
}

func (m *machine) title(inv *invocation) string {
	return fmt.Sprintf("#%d %s key-%d payload-%d, deadline %s, at %s", inv.id, inv.w.name, inv.key, inv.payload, inv.dl.name, m.nowString())
}

// land steps the model through an invocation that has just entered its
// handler or returned, with the store calls obs it made: the store (apply),
// then the way its wrapper's flight took it there or answered it (route).
// The store comes first, so that a call that wrongly went to the store and
// took a live record over is reported as the safety violation it is.
func (m *machine) land(t *rapid.T, inv *invocation, obs []observation, share *sharedReplay) {
	if len(obs) > 0 && obs[0].op != opClaim {
		t.Fatalf("#%d: its first store call, %v, is not a claim", inv.id, obs[0])
	}
	if inv.ran {
		m.checkEntry(t, inv)
		inv.running = true
	}
	m.apply(t, obs)
	m.route(t, inv, len(obs) > 0, share)
	if inv.ran {
		m.checkStep(t, inv)
	}
	if inv.ran {
		// It leads its wrapper's flight for the key, holding the lease.
		m.flights[flightKey{inv.w.idx, inv.key}] = inv
	} else {
		m.checkResult(t, inv)
	}
}

// sharedReplay is the response the leader of a flight replayed from a
// completed record; a call that waited on the leader's claim shares it.
type sharedReplay struct {
	leader  *invocation
	resp    string
	waiting bool // the call was seen waiting on the flight
}

// route checks the way inv's wrapper took it before the store (reached:
// its claim reached the store), by the coalescing rules of
// idempotent/coalesce.go. While a call of the same wrapper leads the key and
// holds its lease (its claim succeeded, its handler runs, and its lease has
// not lapsed by the injected clock, in the model's own arithmetic), a
// duplicate is answered without a store call: ErrInProgress, or
// ErrPayloadMismatch for another payload. Once that lease has lapsed, the
// duplicate goes to the store, where it may take the record over. A
// duplicate that waited on a claim in flight shares the response that claim
// replayed, if it is for the duplicate's payload. Every other call goes to
// the store. Calls of other wrappers never coalesce.
func (m *machine) route(t *rapid.T, inv *invocation, reached bool, share *sharedReplay) {
	got := fmt.Sprintf("got (%q, %v)", inv.out, inv.err)
	if !reached && inv.ran {
		t.Fatalf("#%d: its handler ran, but no claim of it reached the store", inv.id)
	}
	fk := flightKey{inv.w.idx, inv.key}
	now := m.now()
	if l := m.flights[fk]; l != nil {
		lapsed := l.span.lapsed(now)
		if lapsed == maybe {
			// The lease end is only bracketed: where the call went settles it.
			if reached {
				l.span.hi, lapsed = floorDiv(now, 1e6)-1, yes
			} else {
				l.span.lo, lapsed = floorDiv(now, 1e6), no
			}
		}
		if lapsed == no {
			if reached {
				t.Fatalf("coalescing rule violated: #%d went to the store while #%d, a call of %s, leads key-%d with a live lease (ending %s)",
					inv.id, l.id, inv.w.name, inv.key, m.spanString(l.span))
			}
			if r := m.recs[inv.key]; r == nil || r.lease != l.lease {
				// The store would answer the same: nothing replaces a live lease.
				t.Fatalf("#%d leads %s's flight for key-%d with a live lease (ending %s), but the key's record is not its own but the model's %s",
					l.id, inv.w.name, inv.key, m.spanString(l.span), m.describe(r))
			}
			inv.via = fmt.Sprintf("from the flight of #%d", l.id)
			if inv.payload != l.payload {
				inv.expect = expectMismatch
				m.stats.flightMismatch.Add(1)
			} else {
				inv.expect = expectInProgress
				m.stats.flightInProgress.Add(1)
			}
			return
		}
		if !reached {
			store := "it holds"
			if r := m.recs[inv.key]; r == nil || r.claimable(inv.payload, now) == yes {
				store = "it would let the call run:"
			}
			t.Fatalf("coalescing rule violated: #%d %s without a store call, though the lease of #%d, which leads %s's flight for key-%d, ended %s: past it, a duplicate goes to the store (%s %s)",
				inv.id, got, l.id, inv.w.name, inv.key, m.spanString(l.span), store, m.describe(m.recs[inv.key]))
		}
		// The duplicate retires the lapsed flight and leads one of its own.
		delete(m.flights, fk)
		m.stats.pastLapsed.Add(1)
		return
	}
	if share != nil && share.leader.payload == inv.payload {
		if !reached {
			inv.expect, inv.replay, inv.via = expectReplay, share.resp, fmt.Sprintf("shared by #%d", share.leader.id)
			m.stats.shared.Add(1)
			return
		}
		if share.waiting {
			t.Fatalf("coalescing rule violated: #%d went to the store though it waited on the claim of #%d, which replayed %q for its payload",
				inv.id, share.leader.id, share.resp)
		}
		return
	}
	if !reached {
		why := fmt.Sprintf("no call of %s leads key-%d", inv.w.name, inv.key)
		if share != nil {
			why += fmt.Sprintf(", and #%d, whose claim it waited on, replayed a response for payload-%d", share.leader.id, share.leader.payload)
		}
		t.Fatalf("#%d %s without a claim reaching the store, though %s", inv.id, got, why)
	}
}

// Finish lets a running handler return, with a response or an error, and
// waits for its completion or release (late, if its lease was taken over).
func (m *machine) Finish(t *rapid.T) {
	inv := m.pickRunning(t)
	inv.failed = rapid.IntRange(0, 3).Draw(t, "handlerFails") == 3
	if inv.w.tx && !inv.failed {
		inv.abort = rapid.IntRange(0, 3).Draw(t, "writeFails") == 3
	}
	op := opComplete
	switch {
	case inv.failed && inv.holds:
		op = opSuspend
	case inv.failed:
		op = opRelease
	}
	f := drawFault(t, "finishFault")
	m.store.plan(inv.id, op, f)
	inv.value = fmt.Sprintf("response-%d", inv.id)
	inv.cmd <- handlerCmd{fail: inv.failed, abort: inv.abort, value: inv.value}
	m.wait(t, inv)
	obs := m.store.take()
	m.store.clear(inv.id)
	how := "returns " + inv.value
	switch {
	case inv.failed:
		how = "fails"
	case inv.abort:
		how += " with a write that fails"
	}
	t.Logf("#%d %s at %s: %v -> %s", inv.id, how, m.nowString(), obs, result(inv))
	for _, o := range obs {
		switch {
		case o.inv != inv.id:
		case o.op == opRelease && inv.holds:
			t.Fatalf("invariant 7 violated: %v: a failed run deleted a record holding a finished step, instead of suspending it", o)
		case o.op == opSuspend && !inv.holds:
			t.Fatalf("%v: a failed run without steps suspended its record, instead of releasing it", o)
		}
	}
	m.apply(t, obs)
	m.checkResult(t, inv)
	m.checkWrites(t, inv)
}

// Crash kills a running owner: its process dies, so none of its writes
// reach the store (the handler returns, but its completion is dropped).
func (m *machine) Crash(t *rapid.T) {
	inv := m.pickRunning(t)
	inv.crashed = true
	m.store.kill(inv.lease)
	inv.value = fmt.Sprintf("response-%d", inv.id)
	inv.cmd <- handlerCmd{value: inv.value}
	m.wait(t, inv)
	obs := m.store.take()
	t.Logf("#%d crashes at %s: %v -> %s", inv.id, m.nowString(), obs, result(inv))
	m.apply(t, obs)
	m.checkResult(t, inv)
	m.checkWrites(t, inv)
}

// Jump moves the injected clock forward: by a fixed step, or to either side
// of a lease end or an expiry the model knows.
func (m *machine) Jump(t *rapid.T) {
	type target struct {
		name string
		at   int64
	}
	now := m.now()
	var ts []target
	add := func(name string, at int64) {
		if at > now && at <= m.end {
			ts = append(ts, target{name, at})
		}
	}
	for _, j := range jumps {
		add("+"+j.name, satAdd(now, int64(j.d)))
	}
	leaseEdges := func(who string, s *span) {
		add("last ms of the lease of "+who, satMul(s.lo, 1e6))
		add("first ms past the lease of "+who, satMul(s.hi+1, 1e6))
	}
	for k, r := range m.recs {
		if r == nil {
			continue
		}
		if r.status == storage.StatusInProgress {
			leaseEdges(fmt.Sprintf("key-%d", k), r.span)
		}
		add(fmt.Sprintf("last s before key-%d expires", k), satMul(r.expLo, 1e9))
		add(fmt.Sprintf("first s key-%d is expired", k), satMul(r.expHi+1, 1e9))
	}
	for _, inv := range m.invs {
		if inv.running {
			leaseEdges(fmt.Sprintf("#%d", inv.id), inv.span)
		}
	}
	if len(ts) == 0 {
		t.Skip("the clock is at its horizon")
	}
	to := ts[rapid.IntRange(0, len(ts)-1).Draw(t, "jump")]
	m.clock.Store(to.at)
	t.Logf("clock jumps to %s (%s)", m.nowString(), to.name)
}

// result describes where an invocation stands after a step, for the log.
func result(inv *invocation) string {
	select {
	case <-inv.done:
	default:
		return "handler running"
	}
	if inv.err != nil {
		return "caller gets error: " + inv.err.Error()
	}
	return fmt.Sprintf("caller gets %q", inv.out)
}

func (m *machine) running() []*invocation {
	var running []*invocation
	for _, inv := range m.invs {
		if inv.running {
			running = append(running, inv)
		}
	}
	return running
}

func (m *machine) pickRunning(t *rapid.T) *invocation {
	running := m.running()
	if len(running) == 0 {
		t.Skip("no handler is running")
	}
	return running[rapid.IntRange(0, len(running)-1).Draw(t, "run")]
}

func (m *machine) wait(t *rapid.T, inv *invocation) {
	select {
	case <-inv.done:
		inv.running = false
		// Its call is over: its wrapper retires the flight it led, unless
		// a duplicate past its lease already did.
		if fk := (flightKey{inv.w.idx, inv.key}); m.flights[fk] == inv {
			delete(m.flights, fk)
		}
	case <-time.After(waitLimit):
		t.Fatalf("#%d: did not return within %v of its handler", inv.id, waitLimit)
	}
}

// checkEntry checks a handler that just started, against the model as it
// was before its claim.
func (m *machine) checkEntry(t *rapid.T, inv *invocation) {
	now := m.now()
	for _, o := range m.invs {
		if o != inv && o.running && !o.crashed && o.key == inv.key && o.span.lapsed(now) == no {
			t.Fatalf("invariant 1 violated: the handler of #%d started for key-%d at %s while #%d still runs with a live lease (ending %s): two owners at once",
				inv.id, inv.key, m.nowString(), o.id, m.spanString(o.span))
		}
	}
	r := m.recs[inv.key]
	if r == nil || r.expired(now) != no {
		return
	}
	switch {
	case r.status == storage.StatusInProgress && r.span.lapsed(now) == no:
		t.Fatalf("invariant 1 violated: #%d took over key-%d at %s before the lease of its %s ended",
			inv.id, inv.key, m.nowString(), m.describe(r))
	case r.payload != inv.payload:
		t.Fatalf("invariant 2 violated: the handler of #%d ran with payload-%d at %s while key-%d is bound to payload-%d by its %s",
			inv.id, inv.payload, m.nowString(), inv.key, r.payload, m.describe(r))
	case r.status == storage.StatusCompleted:
		t.Fatalf("invariant 3 violated: the handler of #%d ran again at %s for key-%d instead of replaying its live %s",
			inv.id, m.nowString(), inv.key, m.describe(r))
	}
}

// apply steps the model through the store calls of one step, checking the
// store's real answers against the model's prediction.
func (m *machine) apply(t *rapid.T, obs []observation) {
	for _, o := range obs {
		inv := m.invs[o.inv]
		if o.tx {
			c := o
			inv.commit = &c
		}
		if (o.op == opRelease || o.op == opSuspend) && inv.commit != nil {
			g := o
			inv.giveBack = &g
		}
		switch {
		case !o.called:
			// Never reached the store: nothing changed.
			if o.op == opClaim {
				inv.expect = expectStoreError
			}
		case o.err != nil && !(o.op != opClaim && errors.Is(o.err, storage.ErrLeaseLost)) &&
			!(o.tx && inv.abort && errors.Is(o.err, storage.ErrTxAborted)) &&
			!((o.op == opRelease || o.op == opSuspend) && errors.Is(o.err, storage.ErrAlreadyCompleted)):
			t.Fatalf("%v: the store failed without an injected fault", o)
		case o.op == opClaim:
			m.applyClaim(t, inv, o)
		case o.op == opComplete:
			m.applyComplete(t, inv, o)
		case o.op == opAppendStep:
			m.applyAppendStep(t, inv, o)
		case o.op == opSuspend:
			m.applySuspend(t, inv, o)
		default:
			m.applyRelease(t, inv, o)
		}
	}
}

func (m *machine) applyClaim(t *rapid.T, inv *invocation, o observation) {
	now := o.now.UnixNano()
	if now != m.now() {
		t.Fatalf("%v: claimed at %d, not at the injected clock's %d", o, now, m.now())
	}
	r := m.recs[inv.key]
	want := yes
	if r != nil {
		want = r.claimable(inv.payload, now)
	}
	if o.res.Claimed {
		if want == no {
			which := "invariant 1 violated: a live lease was taken over"
			switch {
			case r.payload != inv.payload:
				which = "invariant 2 violated: a record bound to another payload was taken over"
			case r.status == storage.StatusCompleted:
				which = "invariant 3 violated: a live completed record was claimed instead of replayed"
			}
			t.Fatalf("%s: %v replaced key-%d's %s at %s", which, o, inv.key, m.describe(r), m.nowString())
		}
		if o.res.TookOver && r != nil && m.invs[r.owner].w != inv.w {
			m.stats.crossTakeovers.Add(1)
		}
		// The claim keeps the finished step of a record it takes over for
		// the same payload while that record lives (storage.Record.Resumable).
		kept := no
		if r != nil && r.stepDone && r.status == storage.StatusInProgress && r.payload == inv.payload {
			kept = no
			switch r.expired(now) {
			case no:
				kept = yes
			case maybe:
				kept = maybe
			}
		}
		got := len(o.res.Steps) > 0
		if kept == yes && !got || kept == no && got {
			t.Fatalf("invariant 7 violated: %v: the claim kept %d steps of key-%d's %s at %s, want them %s",
				o, len(o.res.Steps), inv.key, m.describe(r), m.nowString(), map[tri]string{yes: "kept", no: "dropped"}[kept])
		}
		inv.resumed, inv.holds = got, got
		if got {
			m.stats.resumed.Add(1)
		}
		s, expLo, expHi := inv.w.opts.claimTimes(now, inv.deadline, inv.realBefore, o.realAt)
		m.recs[inv.key] = &record{status: storage.StatusInProgress, payload: inv.payload, owner: inv.id,
			lease: o.rec.Lease, span: &s, expLo: expLo, expHi: expHi, stepDone: got}
		inv.lease, inv.span = o.rec.Lease, &s
		inv.minRun = inv.w.opts.handlerTime(inv.deadline, o.realAt)
		inv.expect = expectRun
		if o.fault == faultAfter {
			inv.expect = expectStoreError
		}
		return
	}
	if want == yes {
		t.Fatalf("invariant 5 violated: %v, though key-%d's %s should allow it at %s", o, inv.key, m.describe(r), m.nowString())
	}
	ex := o.res.Existing
	if ex == nil || ex.Lease != r.lease || ex.Status != r.status {
		t.Fatalf("%v: the store answered with a record other than the model's %s", o, m.describe(r))
	}
	r.refused(inv.payload, now)
	if r.status == storage.StatusInProgress && m.invs[r.owner].w != inv.w {
		m.stats.storeContended.Add(1)
	}
	switch {
	case o.fault == faultAfter:
		inv.expect = expectStoreError
	case r.payload != inv.payload:
		inv.expect = expectMismatch
	case r.status == storage.StatusCompleted:
		inv.expect, inv.replay = expectReplay, r.resp
	default:
		inv.expect = expectInProgress
	}
}

func (m *machine) applyComplete(t *rapid.T, inv *invocation, o observation) {
	r := m.recs[inv.key]
	owns := r != nil && r.lease == o.lease
	landed := o.err == nil
	switch {
	case landed && inv.abort:
		t.Fatalf("invariant 8 violated: %v, though one of its writes fails: a transaction with a failing write committed", o)
	case !landed && owns && inv.abort && errors.Is(o.err, storage.ErrTxAborted):
		// Nothing committed; the wrapper gives the record back next.
	case landed && !owns:
		t.Fatalf("invariant 4 violated: %v, though key-%d's record is not its own but the model's %s", o, inv.key, m.describe(r))
	case !landed && owns:
		t.Fatalf("invariant 5 violated: %v, though key-%d's record is still its own %s", o, inv.key, m.describe(r))
	case landed:
		r.status, r.resp, r.span = storage.StatusCompleted, inv.value, nil
		r.expLo, r.expHi = inv.w.opts.completedExpiry(m.now())
	}
}

func (m *machine) applyRelease(t *rapid.T, inv *invocation, o observation) {
	m.applyGiveBack(t, inv, o, func(*record) { m.recs[inv.key] = nil })
}

// applyGiveBack checks a release or a suspend, fenced by its lease, and
// applies landed to the owner's record when it landed.
func (m *machine) applyGiveBack(t *rapid.T, inv *invocation, o observation, landed func(*record)) {
	r := m.recs[inv.key]
	ok := o.err == nil
	switch {
	case r == nil && !ok:
		t.Fatalf("%v: it must succeed when key-%d has no record", o, inv.key)
	case r == nil:
	case r.lease == o.lease && r.status == storage.StatusCompleted:
		// The caller's completion landed: a give-back keeps the record and
		// says so (the settle of an unknown commit relies on it).
		if !errors.Is(o.err, storage.ErrAlreadyCompleted) {
			t.Fatalf("%v, though key-%d's record is its own %s: want storage.ErrAlreadyCompleted, the record kept", o, inv.key, m.describe(r))
		}
	case r.lease != o.lease && ok:
		t.Fatalf("invariant 4 violated: %v, though key-%d's record is not its own but the model's %s", o, inv.key, m.describe(r))
	case r.lease == o.lease && !ok:
		t.Fatalf("invariant 5 violated: %v, though key-%d's record is still its own %s", o, inv.key, m.describe(r))
	case ok:
		landed(r)
	}
}

// applyAppendStep: the step of a running owner lands in its own record.
func (m *machine) applyAppendStep(t *rapid.T, inv *invocation, o observation) {
	r := m.recs[inv.key]
	owns := r != nil && r.lease == o.lease && r.status == storage.StatusInProgress
	switch landed := o.err == nil; {
	case landed && !owns:
		t.Fatalf("invariant 4 violated: %v, though key-%d's record is not its own but the model's %s", o, inv.key, m.describe(r))
	case !landed && owns:
		t.Fatalf("invariant 5 violated: %v, though key-%d's record is still its own %s", o, inv.key, m.describe(r))
	case landed:
		r.stepDone = true
		inv.holds = true
	}
}

// applySuspend: a failed owner whose record holds a step keeps the record
// and ends its lease a millisecond before now, so the next claim for its
// payload takes it over at once and resumes.
func (m *machine) applySuspend(t *rapid.T, inv *invocation, o observation) {
	m.applyGiveBack(t, inv, o, func(r *record) {
		if want := satAdd(m.now(), -int64(time.Millisecond)); o.now.UnixNano() != want {
			t.Fatalf("%v: lease end %s, want a millisecond before now (%s)", o, m.at(o.now.UnixNano()), m.at(want))
		}
		ms := floorDiv(o.now.UnixNano(), 1e6)
		r.span = &span{lo: ms, hi: ms}
		m.stats.suspended.Add(1)
	})
}

// checkStep checks the step a handler took on entry (invariant 7): its
// function runs exactly when the record did not hold it, so a finished
// step never runs again for the same record, and never answers from nothing.
func (m *machine) checkStep(t *rapid.T, inv *invocation) {
	if !inv.w.steps {
		return
	}
	switch {
	case inv.stepErr != nil:
		t.Fatalf("#%d: its step failed: %v", inv.id, inv.stepErr)
	case inv.resumed && inv.stepRan:
		t.Fatalf("invariant 7 violated: the step of #%d ran again for key-%d, though its claim handed over the record's finished step", inv.id, inv.key)
	case !inv.resumed && !inv.stepRan:
		t.Fatalf("invariant 7 violated: the step of #%d for key-%d answered without running, though its record held no step", inv.id, inv.key)
	}
	if r := m.recs[inv.key]; r == nil || r.owner != inv.id || !r.stepDone {
		t.Fatalf("invariant 7 violated: #%d took its step, but key-%d's %s does not hold it", inv.id, inv.key, m.describe(r))
	}
}

// sentinels are the documented errors a wrapped function returns.
var sentinels = []error{idempotent.ErrMissingKey, idempotent.ErrInvalidKey, idempotent.ErrInvalidPayload,
	idempotent.ErrInProgress, idempotent.ErrPayloadMismatch, idempotent.ErrResponseNotStored,
	idempotent.ErrResponseEncoding, idempotent.ErrStore, idempotent.ErrCorruptRecord, idempotent.ErrTxAborted}

// checkResult checks what the caller of a returned invocation got against
// what the model expected when the store answered its claim.
func (m *machine) checkResult(t *rapid.T, inv *invocation) {
	inv.running = false
	got := fmt.Sprintf("got (%q, %v)", inv.out, inv.err)
	if inv.err != nil && !errors.Is(inv.err, errHandler) {
		documented := false
		for _, s := range sentinels {
			documented = documented || errors.Is(inv.err, s)
		}
		if !documented {
			t.Fatalf("invariant 5 violated: #%d %s: an error that is none of the documented sentinels", inv.id, got)
		}
	}
	if inv.ran && inv.expect != expectRun {
		t.Fatalf("#%d: its handler ran, but its claim did not succeed (expectation %d)", inv.id, inv.expect)
	}
	switch inv.expect {
	case expectNothing:
		t.Fatalf("#%d %s without a claim reaching the store", inv.id, got)
	case expectRun:
		switch {
		case !inv.ran && errors.Is(inv.err, idempotent.ErrStore) && inv.took >= inv.minRun:
			// A claim slower than the handler's whole (real) time: the
			// wrapper gives the key back unrun, as documented for ErrStore.
		case !inv.ran:
			t.Fatalf("#%d %s: its claim succeeded but its handler never ran", inv.id, got)
		case inv.failed && !errors.Is(inv.err, errHandler):
			t.Fatalf("#%d %s, not its handler's error", inv.id, got)
		case inv.w.tx && !inv.failed:
			m.checkTxResult(t, inv, got)
		case !inv.failed && (inv.err != nil || inv.out != inv.value):
			t.Fatalf("invariant 5 violated: #%d %s, not its handler's response %q", inv.id, got, inv.value)
		}
	case expectReplay:
		if inv.err != nil || inv.out != inv.replay {
			t.Fatalf("invariant 3 violated: #%d %s, not the replay of %q, the response whose completion landed%s", inv.id, got, inv.replay, inv.from())
		}
	case expectInProgress:
		if !errors.Is(inv.err, idempotent.ErrInProgress) || inv.out != "" {
			t.Fatalf("#%d %s, not ErrInProgress%s", inv.id, got, inv.from())
		}
	case expectMismatch:
		if !errors.Is(inv.err, idempotent.ErrPayloadMismatch) || inv.out != "" {
			t.Fatalf("invariant 2 violated: #%d %s, not ErrPayloadMismatch%s", inv.id, got, inv.from())
		}
	case expectStoreError:
		if !errors.Is(inv.err, idempotent.ErrStore) || inv.out != "" {
			t.Fatalf("invariant 5 violated: #%d %s after a store fault on its claim, not ErrStore", inv.id, got)
		}
	}
}

// writeName is the name of inv's write.
func (m *machine) writeName(inv *invocation) string { return fmt.Sprintf("%s-w%d", m.prefix, inv.id) }

// addWrites adds inv's write to its run's transaction, and a failing one
// with abort.
func (m *machine) addWrites(ctx context.Context, inv *invocation, abort bool) error {
	tx, err := storage.TxFromContext(ctx)
	if err != nil {
		return err
	}
	if err := m.writes.Add(ctx, innerTx(tx), m.writeName(inv), false); err != nil {
		return err
	}
	if abort {
		return m.writes.Add(ctx, innerTx(tx), m.writeName(inv)+"-fails", true)
	}
	return nil
}

// checkTxResult checks what the caller of a tx wrapper whose handler
// succeeded got: its response only when its commit landed, and never a
// success whose writes did not commit — ErrInProgress when the lease was
// lost, the store's ErrTxAborted when a write failed, ErrStore when the
// wrapper cannot know (a fault, or a crashed owner's dropped commit).
func (m *machine) checkTxResult(t *rapid.T, inv *invocation, got string) {
	c := inv.commit
	var want error
	switch {
	case inv.txErr != nil:
		t.Fatalf("#%d: adding its writes failed: %v", inv.id, inv.txErr)
	case c == nil:
		t.Fatalf("#%d %s: its handler added writes and succeeded, but no commit was made", inv.id, got)
	case c.dropped || c.fault != faultNone:
		// Unknown to the wrapper, which settles it by the record's fence:
		// its response exactly when the commit landed (and the settle found
		// it), else ErrStore (or ErrInProgress when the settle met another
		// owner).
		m.stats.txUnknown.Add(1)
		landed := c.called && c.err == nil
		if inv.err == nil {
			if !landed || inv.out != inv.value {
				t.Fatalf("invariant 8 violated: #%d %s after %v: a success whose writes did not commit", inv.id, got, c)
			}
			return
		}
		g := inv.giveBack
		if landed && g != nil && g.called && g.fault == faultNone && errors.Is(g.err, storage.ErrAlreadyCompleted) {
			t.Fatalf("#%d %s after %v, though its settle (%v) found the commit landed: want its response", inv.id, got, c, g)
		}
		want = idempotent.ErrStore
		if g != nil && g.called && errors.Is(g.err, storage.ErrLeaseLost) {
			want = idempotent.ErrInProgress
		}
	case c.err == nil:
		if inv.err != nil || inv.out != inv.value {
			t.Fatalf("invariant 5 violated: #%d %s, not its handler's response %q, though its commit landed", inv.id, got, inv.value)
		}
		m.stats.txCommitted.Add(1)
		return
	case errors.Is(c.err, storage.ErrLeaseLost):
		want = idempotent.ErrInProgress
		m.stats.txLeaseLost.Add(1)
	case errors.Is(c.err, storage.ErrTxAborted):
		want = idempotent.ErrTxAborted
		m.stats.txAborted.Add(1)
	default:
		t.Fatalf("#%d: its commit failed with %v", inv.id, c.err)
	}
	if !errors.Is(inv.err, want) || inv.out != "" {
		t.Fatalf("invariant 8 violated: #%d %s after %v, want an error wrapping %v: a caller never gets a success whose writes did not commit",
			inv.id, got, c, want)
	}
}

// checkWrites checks invariant 8 for an invocation whose call returned: its
// write committed exactly when its commit landed (in the store, whatever
// the wrapper was told).
func (m *machine) checkWrites(t *rapid.T, inv *invocation) {
	if !inv.w.tx {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	got, err := m.writes.Committed(ctx, m.writeName(inv))
	if err != nil {
		t.Fatalf("#%d: read its write: %v", inv.id, err)
	}
	want := inv.commit != nil && inv.commit.called && inv.commit.err == nil
	if got != want {
		t.Fatalf("invariant 8 violated: #%d: its write committed = %v, its completion landed = %v (%v): the writes and the completion commit together or not at all",
			inv.id, got, want, inv.commit)
	}
	if inv.abort {
		if got, err := m.writes.Committed(ctx, m.writeName(inv)+"-fails"); err != nil || got {
			t.Fatalf("invariant 8 violated: #%d: its failing write committed = %v (%v)", inv.id, got, err)
		}
	}
}
