package idempotent

import (
	"context"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// Call hooks: what a tracer needs that an outcome hook cannot give. An
// outcome hook hears of a call once it is over; a span must start before the
// claim, so that it covers the claim, the run and the completion, and the
// work's own spans must be its children. The engine stays free of any
// tracing library: a call hook turns these reports into spans
// (github.com/idemkit/idemkit/otelidem does, for OpenTelemetry).

// CallHook starts the trace of one call: it is called as the call starts,
// before its key is checked, and returns the context the call goes on in
// (the work's context descends from it, so a span it carries is the parent
// of the work's spans and of the store's calls) and the CallTrace that hears
// of the rest of the call. See WithCallHook.
type CallHook func(ctx context.Context, call CallInfo) (context.Context, CallTrace)

// CallInfo is what a CallHook learns as a call starts. It holds nothing of
// the call's key or payload; the record id comes with the Event at the end.
type CallInfo struct {
	// Prefix is the Engine's key prefix (WithPrefix; the function name by
	// default).
	Prefix string
	// Store names the Engine's store by its Go type, such as
	// "*dynamostore.Store".
	Store string
	// Attrs are the call's Call.Attrs (the batch adapters add the
	// message's id).
	Attrs []slog.Attr
}

// CallTrace is a CallHook's view of one call: every field is optional.
type CallTrace struct {
	// Trace is the trace context to keep in the record this call completes
	// (storage.Record.Trace; a W3C traceparent, say), so that a replay of
	// its response, in any process and after any restart, can link to this
	// call: the replay's Event.Trace. Printable ASCII of at most
	// storage.MaxTraceBytes; anything else is not stored. With several
	// hooks, the first one's non-empty Trace is stored.
	Trace string
	// Progress, when set, hears of each Stage of the call as it happens.
	// It runs synchronously and must not block; steps taken from several
	// goroutines at once report from each of them, so it must be safe for
	// concurrent use.
	Progress func(Progress)
	// End, when set, is called once, with the call's Event, after the
	// outcome hooks (WithOutcomeHook). For a record a batch completes
	// after the call returned, that is once the completion landed.
	End func(Event)
}

// Stage names a point inside a call that CallTrace.Progress hears of.
type Stage int

// The stages, in the order a call meets them. Each one marked "a store
// call" is one call to the store (a claim the batch adapters make for many
// records at once counts as one for each).
const (
	// StageClaim: the store answered a claim, or a poll of a record in
	// progress (WithWaitInProgress): a store call. Progress.Claimed,
	// TookOver, Resumed and Steps say what it gave; Err is set when the
	// store failed.
	StageClaim Stage = iota + 1
	// StageWait: the record is in progress elsewhere and the call waits
	// Progress.Wait before it polls again (WithWaitInProgress).
	StageWait
	// StageStep: a Step finished and was recorded (a store call; Err when
	// the write failed), or was answered from the record without running
	// (Progress.Replayed; no store call). Progress.Step is its name.
	StageStep
	// StageRun: the work returned; Err is its error (or its panic).
	StageRun
	// StageCommit: the completion was written, with the handler's writes on
	// a storage.TxStore: a store call; Err when it failed.
	StageCommit
	// StageGiveBack: the record was given back after the work failed:
	// released, or suspended with its steps (a store call); Err when it
	// failed.
	StageGiveBack
)

var stageNames = [...]string{
	StageClaim:    "claim",
	StageWait:     "wait",
	StageStep:     "step",
	StageRun:      "run",
	StageCommit:   "commit",
	StageGiveBack: "give_back",
}

// String returns the stage's stable snake_case name, for span events.
func (s Stage) String() string {
	if s > 0 && int(s) < len(stageNames) {
		return stageNames[s]
	}
	return "unknown"
}

// StoreCall reports whether the stage, as p reports it, was a call to the
// store: a claim, a recorded step, a completion or a give-back.
func (p Progress) StoreCall() bool {
	switch p.Stage {
	case StageClaim, StageCommit, StageGiveBack:
		return true
	case StageStep:
		return !p.Replayed
	}
	return false
}

// Progress is one report to CallTrace.Progress.
type Progress struct {
	// Stage is the point of the call reported.
	Stage Stage
	// Claimed (StageClaim) reports that the call now owns the record;
	// false when the store refused the claim (the record is completed, or
	// in progress elsewhere).
	Claimed bool
	// TookOver and Resumed (StageClaim) are the claim's
	// storage.ClaimResult.TookOver and Resumed.
	TookOver, Resumed bool
	// Steps (StageClaim) is the number of finished steps the claim resumed
	// the record with.
	Steps int
	// Step (StageStep) is the step's name.
	Step string
	// Replayed (StageStep) reports a step answered from the record.
	Replayed bool
	// Wait (StageWait) is how long the call waits before its next poll.
	Wait time.Duration
	// Err is the stage's error, if any.
	Err error
}

// WithCallHook adds hook, called as each call starts, for tracing: see
// CallHook and CallTrace. Hooks compose: each WithCallHook adds one, they
// start in the order given (each gets the context the one before returned)
// and hear of the call in that order. Without a call hook, a call costs
// nothing for them: no allocation, no clock reading.
func WithCallHook(hook CallHook) Option {
	return func(c *config) {
		if hook != nil {
			c.callHooks = append(c.callHooks, hook)
		}
	}
}

// traceKey is the context key of the traceCtx of the call under way.
type traceKey struct{}

// traceCtx is a traced call's context: the CallTraces of its hooks, found
// by the engine's report sites through the context they already have.
type traceCtx struct {
	context.Context
	e      *Engine
	traces []CallTrace
	ended  atomic.Bool
}

func (c *traceCtx) Value(key any) any {
	if key == (traceKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// tracing reports whether e has call hooks: every report site checks it
// first, so an Engine without them pays one comparison.
func (e *Engine) tracing() bool { return len(e.cfg.callHooks) > 0 }

// startCall starts call's trace with every call hook and returns the
// context the call goes on in.
func (e *Engine) startCall(ctx context.Context, call *Call) context.Context {
	info := CallInfo{Prefix: e.cfg.prefix, Store: storeName(e.store), Attrs: call.Attrs}
	tc := &traceCtx{e: e, traces: make([]CallTrace, 0, len(e.cfg.callHooks))}
	for _, hook := range e.cfg.callHooks {
		next, t := hook(ctx, info)
		if next != nil {
			ctx = next
		}
		tc.traces = append(tc.traces, t)
	}
	tc.Context = ctx
	return tc
}

// traceOf returns the traceCtx of e's call that ctx is in, or nil.
func (e *Engine) traceOf(ctx context.Context) *traceCtx {
	tc, _ := ctx.Value(traceKey{}).(*traceCtx)
	if tc == nil || tc.e != e {
		return nil
	}
	return tc
}

// progress reports p to the call's hooks.
func (e *Engine) progress(ctx context.Context, p Progress) {
	tc := e.traceOf(ctx)
	if tc == nil {
		return
	}
	for _, t := range tc.traces {
		if t.Progress != nil {
			t.Progress(p)
		}
	}
}

// endCall reports the call's event to its hooks, once.
func (e *Engine) endCall(ctx context.Context, ev Event) {
	tc := e.traceOf(ctx)
	if tc == nil || tc.ended.Swap(true) {
		return
	}
	for _, t := range tc.traces {
		if t.End != nil {
			t.End(ev)
		}
	}
}

// recordTrace is the trace context to keep in the record the call
// completes: its first hook's valid CallTrace.Trace, or "".
func (e *Engine) recordTrace(ctx context.Context) string {
	tc := e.traceOf(ctx)
	if tc == nil {
		return ""
	}
	for _, t := range tc.traces {
		if t.Trace != "" && validTrace(t.Trace) {
			return t.Trace
		}
	}
	return ""
}

// validTrace reports whether s is text every store holds as a trace:
// printable ASCII of at most storage.MaxTraceBytes.
func validTrace(s string) bool {
	if len(s) > storage.MaxTraceBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// storeName names a store by its Go type; reflect keeps the name, so this
// allocates nothing.
func storeName(s storage.Store) string { return reflect.TypeOf(s).String() }

// runProgress is the StageRun report of a work that returned err, or
// panicked (p).
func runProgress(p *handlerPanic, err error) Progress {
	if p != nil {
		err = p.err()
	}
	return Progress{Stage: StageRun, Err: err}
}
