package modelcheck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// fault is what faultStore does to one store call.
type fault int

const (
	faultNone   fault = iota
	faultBefore       // the call fails before anything is written
	faultAfter        // the write lands, then its answer is lost
)

func (f fault) String() string {
	return [...]string{"none", "error-before-write", "write-lands-answer-lost"}[f]
}

type opKind int

const (
	opClaim opKind = iota
	opComplete
	opRelease
	opAppendStep
	opSuspend
)

func (o opKind) String() string {
	return [...]string{"Claim", "Complete", "Release", "AppendStep", "Suspend"}[o]
}

var (
	errInjected = errors.New("modelcheck: injected store fault")
	errCrashed  = errors.New("modelcheck: write of a crashed owner dropped")
)

// observation is one store call as faultStore saw it: what was asked, what
// the real store answered (when it was asked at all), and what the wrapper
// was told. It is how the model learns whether a faulted write landed.
type observation struct {
	op      opKind
	tx      bool // a Complete made as a transaction's commit, with the handler's writes
	inv     int  // the invocation that made the call
	lease   string
	rec     storage.Record // Claim and Complete
	now     time.Time      // Claim; Suspend: the lease end asked for
	realAt  time.Time      // Claim: real time when the store was called
	fault   fault
	during  int  // the invocation whose claim the gate held in flight when this call began, or -1
	dropped bool // Complete/Release of a crashed owner: never sent
	called  bool // the real store was called
	res     storage.ClaimResult
	err     error // the real store's error
}

func (o observation) String() string {
	s := fmt.Sprintf("%s by #%d", o.op, o.inv)
	if o.tx {
		s = fmt.Sprintf("%s with its writes by #%d", o.op, o.inv)
	}
	switch {
	case o.dropped:
		return s + ": dropped (owner crashed)"
	case !o.called:
		return s + ": " + o.fault.String()
	case o.op == opClaim && o.err == nil && o.res.Claimed:
		s += fmt.Sprintf(": claimed (took over: %v, steps kept: %d)", o.res.TookOver, len(o.res.Steps))
	case o.op == opClaim && o.err == nil && o.res.Existing != nil:
		s += fmt.Sprintf(": refused by %s record", o.res.Existing.Status)
	case o.err != nil:
		s += ": " + o.err.Error()
	default:
		s += ": ok"
	}
	if o.fault == faultAfter {
		s += ", answer lost"
	}
	return s
}

// invKey carries the invocation id in the invocation's context, which the
// wrapper hands to every store call (completion and release keep its values).
type invKey struct{}

func invOf(ctx context.Context) int {
	id, ok := ctx.Value(invKey{}).(int)
	if !ok {
		panic("modelcheck: store call without an invocation id in its context")
	}
	return id
}

// faultStore wraps a real Store: it injects the faults planned for each
// invocation, drops every completion and release of a crashed owner's lease,
// and logs every call for the model.
type faultStore struct {
	inner storage.StepStore

	mu     sync.Mutex
	faults map[int]map[opKind]fault // per invocation, each used once
	dead   map[string]bool          // leases of crashed owners
	obs    []observation
	gate   *gate // the claim to hold in flight, until it reaches the store
	flying int   // the invocation whose claim a gate holds in the store now, or -1
}

// gate holds one invocation's claim in flight: it reaches the store, and
// waits there (before the real store is called) until the step opens the
// gate, so that the step can start a duplicate meanwhile.
type gate struct {
	inv     int
	arrived chan struct{} // closed when the claim reaches the store
	release chan struct{}
	once    sync.Once
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// hold makes the next claim of invocation inv wait at a gate.
func (s *faultStore) hold(inv int) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = &gate{inv: inv, arrived: make(chan struct{}), release: make(chan struct{})}
	return s.gate
}

// unhold disarms a gate whose claim never came.
func (s *faultStore) unhold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = nil
}

// flown ends the flight of a held claim.
func (s *faultStore) flown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flying = -1
}

func newFaultStore(inner storage.StepStore) *faultStore {
	return &faultStore{inner: inner, faults: map[int]map[opKind]fault{}, dead: map[string]bool{}, flying: -1}
}

// plan makes the next call of op by invocation inv fail with f.
func (s *faultStore) plan(inv int, op opKind, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults[inv] == nil {
		s.faults[inv] = map[opKind]fault{}
	}
	s.faults[inv][op] = f
}

// clear drops what is left of inv's plan once its step is over.
func (s *faultStore) clear(inv int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, inv)
}

func (s *faultStore) kill(lease string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead[lease] = true
}

// take returns the calls logged since the last take.
func (s *faultStore) take() []observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	obs := s.obs
	s.obs = nil
	return obs
}

// begin consumes the fault planned for this call, notes a held claim in
// flight, and returns the gate this call must wait at, if any.
func (s *faultStore) begin(o *observation) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.fault = s.faults[o.inv][o.op]
	delete(s.faults[o.inv], o.op)
	o.dropped = o.op != opClaim && s.dead[o.lease]
	o.during = s.flying
	if g := s.gate; g != nil && g.inv == o.inv && o.op == opClaim {
		s.gate, s.flying = nil, o.inv
		return g
	}
	return nil
}

func (s *faultStore) log(o observation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs = append(s.obs, o)
}

func (s *faultStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	o := observation{op: opClaim, inv: invOf(ctx), lease: rec.Lease, rec: rec, now: now, realAt: time.Now()}
	g := s.begin(&o)
	defer func() { s.log(o) }()
	if g != nil {
		close(g.arrived)
		<-g.release
		s.flown()
	}
	if o.fault == faultBefore {
		return storage.ClaimResult{}, errInjected
	}
	o.called = true
	o.res, o.err = s.inner.Claim(ctx, rec, now)
	if o.fault == faultAfter {
		return storage.ClaimResult{}, errInjected
	}
	return o.res, o.err
}

func (s *faultStore) Complete(ctx context.Context, rec storage.Record) error {
	return s.write(observation{op: opComplete, inv: invOf(ctx), lease: rec.Lease, rec: rec},
		func() error { return s.inner.Complete(ctx, rec) })
}

func (s *faultStore) Release(ctx context.Context, id, lease string) error {
	return s.write(observation{op: opRelease, inv: invOf(ctx), lease: lease},
		func() error { return s.inner.Release(ctx, id, lease) })
}

// AppendStep is logged but never faulted (the model plans no fault for it):
// a crash inside a step (between its side effect and its record) is the one
// case steps do not cover, and the model does not draw it. A crashed
// owner's steps are dropped like its other writes.
func (s *faultStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	return s.write(observation{op: opAppendStep, inv: invOf(ctx), lease: lease},
		func() error { return s.inner.AppendStep(ctx, id, lease, step) })
}

func (s *faultStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	return s.write(observation{op: opSuspend, inv: invOf(ctx), lease: lease, now: leaseEnd},
		func() error { return s.inner.Suspend(ctx, id, lease, leaseEnd) })
}

// write makes a fenced write of an owner: dropped if the owner crashed,
// faulted as planned, logged either way.
func (s *faultStore) write(o observation, call func() error) error {
	s.begin(&o)
	defer func() { s.log(o) }()
	switch {
	case o.dropped:
		return errCrashed
	case o.fault == faultBefore:
		return errInjected
	}
	o.called = true
	o.err = call()
	if o.fault == faultAfter {
		return errInjected
	}
	return o.err
}
