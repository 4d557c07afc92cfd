package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// maxResponseReserve is the most time kept back from processing, before the
// invocation's deadline, to return the batch response: an invocation that
// times out fails its whole batch, successes included.
const maxResponseReserve = 500 * time.Millisecond

// Source describes one event source to the engine. R is its raw record type,
// T the handler's record type.
type Source[R, T any] struct {
	// Name is the package name: the prefix of log lines and panics.
	Name string
	// Noun names a record in log lines: "message", "record".
	Noun string
	// Handle is the user's handler.
	Handle func(context.Context, T) error
	// Decode turns a raw record into the handler's value.
	Decode func(*R) (T, error)
	// Key is the default key.
	Key func(*R, T) (string, error)
	// Payload is the default payload (nil: no payload validation by
	// default).
	Payload func(*R, T) (any, error)
	// Attrs are the log attributes that name a record (its message ID,
	// sequence number, ...), on this package's lines and the Engine's.
	Attrs func(*R) []slog.Attr
	// Context returns ctx carrying the record, for the handler and the
	// Engine's outcome hooks.
	Context func(ctx context.Context, r *R) context.Context
}

// Processor runs the records of a batch through an idempotent.Engine.
type Processor[R, T any] struct {
	engine      *idempotent.Engine
	src         Source[R, T]
	key         func(*R, T) (string, error)
	payload     func(*R, T) (any, error) // nil: no payload validation
	parallelism int                      // WithParallelism's, 0 when not given (Order.Parallelism, else 1)
}

// New returns the Processor of src over e, configured by s. wrap names the
// calling function in its panics: on a nil Engine, and on a key or payload
// function of another type than T (see Settings).
func New[R, T any](e *idempotent.Engine, wrap string, src Source[R, T], s Settings[R]) *Processor[R, T] {
	if e == nil {
		panic(src.Name + ": " + wrap + ": nil Engine")
	}
	p := &Processor[R, T]{engine: e, src: src, key: keyFunc[R, T](&s, src.Name, wrap),
		payload: payloadFunc[R, T](&s, src.Name, wrap), parallelism: s.parallelismSet()}
	if p.key == nil {
		p.key = src.Key
	}
	if p.payload == nil && !s.noPayload {
		p.payload = src.Payload
	}
	return p
}

// Order says how the records of a batch may run.
type Order struct {
	// Lane names the lane of record i, whose key is key ("" when it has no
	// usable key). The records of a lane run one after another, in batch
	// order; lanes run side by side, up to the parallelism. An empty name
	// puts the record in a lane of its own.
	Lane func(i int, key string) string
	// Stop ends a lane at its first record that is not done: the later ones
	// are Skipped, so that a retry sees them in their order.
	Stop bool
	// LaneNoun names a lane in log lines: "message group", "shard".
	LaneNoun string
	// Parallelism is how many lanes run at once when the user gave no
	// WithParallelism; 0 means 1.
	Parallelism int
}

// Status is what became of one record.
type Status int

// The statuses of a record. Only Done records may be dropped by the event
// source; every other one must be delivered again.
const (
	// NotRun: the record was not started (the invocation's time was up).
	NotRun Status = iota
	// Done: the handler ran and succeeded (even if its record could not be
	// completed), or the record is a duplicate of one done.
	Done
	// Failed: the handler failed, or the record was refused (undecodable,
	// invalid, in progress elsewhere, store error, ...).
	Failed
	// Skipped: the record was not run because an earlier record of its
	// lane was not done (Order.Stop).
	Skipped
)

var statusNames = [...]string{NotRun: "not_run", Done: "done", Failed: "failed", Skipped: "skipped"}

// String returns the status's snake_case name.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Result is the outcome of one record.
type Result struct {
	// Status is what became of the record.
	Status Status
	// Ran reports that the handler ran for this record in this invocation.
	Ran bool
}

// item is one record of a batch, prepared for processing.
type item[R, T any] struct {
	rec        *R
	val        T
	attrs      []slog.Attr // the record's log attributes
	key        string
	keyErr     error // the key function failed: reported with Engine.Reject
	payload    any   // the payload to validate, nil for none
	payloadErr error // the payload function failed: reported with Engine.Reject
	err        error // the record cannot be processed at all (invalid, panic)
}

// hasKey reports whether the item has a usable key to group and lock on.
func (it *item[R, T]) hasKey() bool { return it.err == nil && it.keyErr == nil && it.key != "" }

// Run processes recs in order and returns the outcome of each. It never
// panics on a record's account: a panic in a decoder, key or payload
// function, handler or outcome hook fails that record only.
//
// The batch goes to the store in waves: every record's claim at once
// (Engine.ClaimBatch), then the handlers in order, each record's completion
// written while the next handler runs, and the claims no handler ran given
// back together at the end (Batch.Close), before the results are returned.
func (p *Processor[R, T]) Run(ctx context.Context, recs []R, order Order) []Result {
	results := make([]Result, len(recs))
	if len(recs) == 0 {
		return results
	}
	rctx, cancel := reserveResponseTime(ctx)
	defer cancel()

	items := make([]item[R, T], len(recs))
	calls := make([]idempotent.Call, len(recs))
	for i := range recs {
		p.prepare(rctx, &items[i], &recs[i])
		calls[i] = p.call(&items[i])
	}
	pl := makePlan(items, order)
	wave := p.engine.ClaimBatch(rctx, calls)
	p.runLanes(rctx, pl, order, items, results, wave)
	wave.Close(ctx) // the invocation's own deadline: the completions and give-backs use the reserve
	return results
}

// call is the engine's call for an item: its key and payload, when it has
// them and the Engine is not disabled (as idempotent.Wrap, no key or payload
// errors then), and its log attributes.
func (p *Processor[R, T]) call(it *item[R, T]) idempotent.Call {
	call := idempotent.Call{Attrs: it.attrs}
	if it.err == nil && it.keyErr == nil && it.payloadErr == nil && !p.engine.Disabled() {
		call.Key, call.Payload = it.key, it.payload
	}
	return call
}

// reserveResponseTime shortens ctx's deadline, if it has one, by a tenth of
// the time left, at most maxResponseReserve.
func reserveResponseTime(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := max(min(maxResponseReserve, time.Until(deadline)/10), 0)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// prepare decodes a record and derives its key. A panic in a decoder, a
// Validate method or a key function fails this record only.
func (p *Processor[R, T]) prepare(ctx context.Context, it *item[R, T], r *R) {
	it.rec, it.attrs = r, p.src.Attrs(r)
	defer func() {
		if v := recover(); v != nil {
			it.err = fmt.Errorf("%s: %w while decoding or keying the %s: %v", p.src.Name, errPanicked, p.src.Noun, v)
			p.log().LogAttrs(ctx, slog.LevelError, p.src.Name+": panic while decoding or keying a "+p.src.Noun,
				append(it.attrs, slog.Any("panic", v), slog.String("stack", string(debug.Stack())))...)
		}
	}()
	v, err := p.src.Decode(r)
	if err != nil {
		it.err = err
		return
	}
	it.val = v
	it.key, it.keyErr = p.key(r, v)
	if it.keyErr == nil && it.key != "" && p.payload != nil && !p.engine.Disabled() {
		pl, err := p.payload(r, v)
		switch {
		case err != nil:
			it.payloadErr = err
		case pl == nil:
			it.payload = nullPayload
		default:
			it.payload = pl
		}
	}
}

// errPanicked marks an error made of a recovered panic.
var errPanicked = errors.New("panic")

// panicError is the error of a recovered panic: it wraps the panic value
// when that is an error, so it stays matchable with errors.Is and As.
func panicError(pkg, where string, v any) error {
	if perr, isErr := v.(error); isErr {
		return fmt.Errorf("%s: %w %s: %w", pkg, errPanicked, where, perr)
	}
	return fmt.Errorf("%s: %w %s: %v", pkg, errPanicked, where, v)
}

// doneResponse is what a record's entry stores: a record has no response,
// and "{}" is what earlier releases of sqsbatch stored (the JSON of
// struct{}), so entries written by either read alike.
var doneResponse = []byte("{}")

// nullPayload stands for a payload function's nil result, which is a payload
// (the JSON null) and not the absence of one; idempotent.Wrap hashes it the
// same way.
var nullPayload = []byte("null")

// do runs item i through the wave with its key and payload, the handler as
// the work. ran reports that the handler ran in this call; err is then its
// error (nil when it succeeded, even if its entry could not be completed),
// and otherwise the engine's answer (nil for a replay).
func (p *Processor[R, T]) do(ctx context.Context, wave *idempotent.Batch, i int, it *item[R, T]) (ran bool, err error) {
	if !p.engine.Disabled() { // as idempotent.Wrap: no key or payload errors then
		call := idempotent.Call{Attrs: it.attrs, Key: it.key}
		if it.keyErr != nil {
			return false, p.engine.Reject(ctx, idempotent.Call{Attrs: it.attrs}, fmt.Errorf("%w: %w", idempotent.ErrInvalidKey, it.keyErr))
		}
		if it.payloadErr != nil {
			return false, p.engine.Reject(ctx, call, fmt.Errorf("%w: %w", idempotent.ErrInvalidPayload, it.payloadErr))
		}
	}
	res, err := wave.Do(ctx, i, func(ctx context.Context) ([]byte, error) {
		return doneResponse, p.run(ctx, it)
	})
	return res.Ran, err
}

// run calls the user's handler. A panic becomes an error here, where the
// stack still shows where it happened; the engine then releases the entry
// as for any failure. (runtime.Goexit is not recovered: the engine gives the
// key back, and the record stays not done.)
func (p *Processor[R, T]) run(ctx context.Context, it *item[R, T]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.log().LogAttrs(ctx, slog.LevelError, p.src.Name+": handler panicked",
				append(p.src.Attrs(it.rec), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))...)
			err = panicError(p.src.Name, "in handler", v)
		}
	}()
	return p.src.Handle(ctx, it.val)
}

// process runs one record through the engine and reports whether it is done.
func (p *Processor[R, T]) process(ctx context.Context, pl *plan, wave *idempotent.Batch, i int, it *item[R, T], res *Result) {
	attrs := it.attrs
	res.Status = Failed
	defer func() {
		// The handler's own panics are errors by now (see run); this catches
		// those of a payload function or an outcome hook (also when it is
		// told of a rejected record), so that they fail this record rather
		// than the batch or the process (the Lambda runtime cannot recover a
		// panic in a goroutine of ours).
		if v := recover(); v != nil {
			p.log().LogAttrs(ctx, slog.LevelError, p.src.Name+": panic while processing a "+p.src.Noun,
				append(attrs, slog.Any("panic", v), slog.String("stack", string(debug.Stack())))...)
			res.Status = Failed
		}
	}()
	if it.err != nil {
		if !errors.Is(it.err, errPanicked) { // a panic was logged with its stack
			p.log().LogAttrs(ctx, slog.LevelWarn, p.src.Name+": "+p.src.Noun+" cannot be processed",
				append(attrs, slog.String("error", it.err.Error()))...)
		}
		// Never seen by the core: reported to it, so that its outcome hooks
		// and log see the rejection, with the record in the context.
		_ = p.engine.Reject(p.src.Context(ctx, it.rec), idempotent.Call{Attrs: attrs},
			fmt.Errorf("%w: %w", idempotent.ErrInvalidPayload, it.err))
		return
	}
	if mu := pl.locks[it.key]; mu != nil && it.hasKey() {
		mu.Lock()
		defer mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		p.log().LogAttrs(ctx, slog.LevelWarn, p.src.Name+": not processed: the invocation's time is up",
			append(attrs, slog.String("error", err.Error()))...)
		res.Status = NotRun
		return
	}
	ran, err := p.do(p.src.Context(ctx, it.rec), wave, i, it)
	res.Ran = ran
	switch {
	case ran && err != nil:
		// The handler failed, whatever its error wraps (a nested idempotent
		// call's ErrResponseNotStored, say): the engine released the key, and
		// the record must be delivered again.
	case ran:
		// The handler succeeded; the record is done even if its entry could
		// not be completed (reporting it would run the handler again for sure).
		if it.hasKey() {
			pl.done.add(it.key)
		}
		res.Status = Done
	case err == nil || errors.Is(err, idempotent.ErrResponseNotStored):
		// A replay. ErrResponseNotStored: the handler already ran for this
		// key; a record needs no response, so it is done.
		res.Status = Done
	case errors.Is(err, idempotent.ErrInProgress) && it.hasKey() && pl.done.has(it.key):
		// The engine found the key in progress, and its handler ran and
		// succeeded earlier in this batch: that record's completion failed
		// (or its entry was taken over since). The key's work is done here;
		// failing this record would have its redelivery take the entry over
		// after the lease and run the handler again.
		p.log().LogAttrs(ctx, slog.LevelInfo, p.src.Name+": duplicate of a "+p.src.Noun+" that succeeded in this batch", attrs...)
		res.Status = Done
	}
}

// log is the logger of this package's own lines: the Engine's.
func (p *Processor[R, T]) log() *slog.Logger { return p.engine.Logger() }
