package idempotent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

const (
	// finishTimeout bounds a completion or release, which get their own
	// context so a spent invocation cannot leave its record INPROGRESS.
	finishTimeout = 10 * time.Second
	// minFinish is the least time a completion or release is given, even
	// past the deadline: trying costs nothing, and often succeeds.
	minFinish = 250 * time.Millisecond
	// forgetTimeout bounds the best-effort release after a failed claim, so
	// a store outage does not hold the caller's error back for long.
	forgetTimeout = time.Second
	// firstPoll and maxPoll shape the backoff of WithWaitInProgress.
	firstPoll = 50 * time.Millisecond
	maxPoll   = time.Second
)

// Wrap returns handler made idempotent: the first invocation for a key runs
// handler and stores its response in store; duplicates get that response (or a
// documented error) without running handler again. The result has the same
// signature as handler, so it can be passed to lambda.Start or
// lambda.StartHandlerFunc, or called directly to make one side effect inside a
// larger handler idempotent.
//
// Without WithKey the key is the SHA-256 of the whole input as JSON; for Lambda event types
// that carry request ids or timestamps that is rarely what you want.
//
// Wrap panics if store or handler is nil, or if a generic option was
// instantiated with a type other than the handler's input or output type.
func Wrap[In, Out any](store Store, handler func(context.Context, In) (Out, error), opts ...Option) func(context.Context, In) (Out, error) {
	return newWrapper(store, handler, opts).invoke
}

type wrapper[In, Out any] struct {
	cfg     config
	store   Store
	handler func(context.Context, In) (Out, error)
	key     func(In) (string, error)
	scope   func(context.Context, In) (string, error)
	payload func(In) (any, error)
	replay  func(context.Context, Out, Replay) Out
	cache   *expirable.LRU[string, Record]
	rt      *replayCheck // nil for a custom codec; see WithCodec
}

func newWrapper[In, Out any](store Store, handler func(context.Context, In) (Out, error), opts []Option) *wrapper[In, Out] {
	if handler == nil {
		panic("idempotent: Wrap: nil handler")
	}
	if store == nil || (reflect.ValueOf(store).Kind() == reflect.Pointer && reflect.ValueOf(store).IsNil()) {
		panic("idempotent: Wrap: nil store")
	}
	w := &wrapper[In, Out]{cfg: defaultConfig(), store: store, handler: handler}
	for _, opt := range opts {
		opt(&w.cfg)
	}
	checkPrefix(w.cfg.prefix)
	w.key = checkedOption[func(In) (string, error)](w.cfg.keyFn, "WithKey")
	if w.key == nil {
		w.key = func(in In) (string, error) { return wholeInputKey(in) }
	}
	w.scope = checkedOption[func(context.Context, In) (string, error)](w.cfg.scopeFn, "WithScope")
	w.payload = checkedOption[func(In) (any, error)](w.cfg.payloadFn, "WithPayloadValidation")
	w.replay = checkedOption[func(context.Context, Out, Replay) Out](w.cfg.replayFn, "WithReplayHook")
	w.rt = newReplayCheck[Out](w.cfg.codec)
	if w.cfg.cacheSize > 0 {
		w.cache = expirable.NewLRU[string, Record](w.cfg.cacheSize, nil, w.cfg.expiry)
	}
	if w.cfg.disabled {
		w.logger().Warn("idempotent: " + DisableEnv + " is set: handlers run without idempotency (never do this in production)")
	}
	return w
}

// checkPrefix refuses, at start-up, a prefix some store could not hold.
func checkPrefix(prefix string) {
	switch {
	case prefix == "":
		panic("idempotent: WithPrefix: empty prefix")
	case len(prefix) > MaxPrefixBytes:
		panic(fmt.Sprintf("idempotent: WithPrefix: prefix of %d bytes (at most %d)", len(prefix), MaxPrefixBytes))
	case !utf8.ValidString(prefix):
		panic("idempotent: WithPrefix: prefix is not valid UTF-8")
	}
}

// checkedOption asserts that a generic option was instantiated for this
// handler's types; a mismatch is a programmer error found at start-up.
func checkedOption[F any](v any, option string) F {
	var zero F
	if v == nil {
		return zero
	}
	f, ok := v.(F)
	if !ok {
		panic(fmt.Sprintf("idempotent: %s: got %T, want %v (the wrapped handler's types)", option, v, reflect.TypeFor[F]()))
	}
	if reflect.ValueOf(f).IsNil() {
		panic(fmt.Sprintf("idempotent: %s: nil function", option))
	}
	return f
}

func (w *wrapper[In, Out]) logger() *slog.Logger {
	if w.cfg.logger != nil {
		return w.cfg.logger
	}
	return slog.Default()
}

func (w *wrapper[In, Out]) invoke(ctx context.Context, in In) (Out, error) {
	if w.cfg.disabled {
		start := w.cfg.now()
		out, err := w.handler(ctx, in)
		w.finish(ctx, start, Event{Outcome: OutcomeBypassed, HandlerRan: true, Err: err})
		return out, err
	}
	start := w.cfg.now()
	var zero Out

	key, err := w.key(in)
	if err != nil {
		return zero, w.finish(ctx, start, Event{Outcome: OutcomeRejected, Err: fmt.Errorf("%w: %w", ErrInvalidKey, err)})
	}
	if key == "" {
		if w.cfg.optionalKey {
			out, err := w.handler(ctx, in)
			w.finish(ctx, start, Event{Outcome: OutcomeBypassed, HandlerRan: true, Err: err})
			return out, err
		}
		return zero, w.finish(ctx, start, Event{Outcome: OutcomeRejected, Err: ErrMissingKey})
	}
	if err := checkKey(key); err != nil {
		return zero, w.finish(ctx, start, Event{Outcome: OutcomeRejected, Err: err})
	}
	var scope string
	if w.scope != nil {
		if scope, err = w.scope(ctx, in); err != nil {
			return zero, w.finish(ctx, start, Event{Outcome: OutcomeRejected, Err: fmt.Errorf("%w: scope: %w", ErrInvalidKey, err)})
		}
	}
	id := recordID(w.cfg.prefix, scope, key)

	var fp string
	if w.payload != nil {
		p, err := w.payload(in)
		if err == nil {
			fp, err = fingerprint(p)
		}
		if err != nil {
			return zero, w.finish(ctx, start, Event{Outcome: OutcomeRejected, RecordID: id, Err: fmt.Errorf("%w: %w", ErrInvalidPayload, err)})
		}
	}

	if w.cache != nil {
		if rec, ok := w.cache.Get(id); ok && !rec.expiredAt(start) {
			return w.replayRecord(ctx, start, &rec, fp, true)
		}
	}
	return w.claimAndRun(ctx, in, id, fp, start)
}

// claimAndRun claims id and runs the handler, or answers from the record that
// refused the claim. With WithWaitInProgress it polls an in-progress record by
// claiming again, so a poll costs one store call and needs no read permission.
func (w *wrapper[In, Out]) claimAndRun(ctx context.Context, in In, id, fp string, start time.Time) (Out, error) {
	var zero Out
	var waited time.Duration
	poll := firstPoll
	for {
		// The handler's deadline is measured from here, no later than the
		// instant the lease is computed from, so a slow claim shortens the
		// handler's time instead of letting it outlive the lease. (One clock
		// read when the clock is the real one: reads are not free on every
		// host.)
		now := w.cfg.now()
		claimStart := now
		if w.cfg.clockSet {
			claimStart = time.Now()
		}
		budget, ok := w.leaseBudget(ctx)
		if !ok {
			err := ctx.Err()
			if err == nil {
				err = context.DeadlineExceeded
			}
			return zero, w.finish(ctx, start, Event{Outcome: OutcomeStoreError, RecordID: id, Err: fmt.Errorf("%w: no time left to run: %w", ErrStore, err)})
		}
		rec := w.newRecord(id, fp, now, budget)
		res, err := w.store.Claim(ctx, rec, now)
		if err != nil {
			if errors.Is(err, ErrCorruptRecord) {
				return zero, w.finish(ctx, start, Event{Outcome: OutcomeRejected, RecordID: id, Err: err})
			}
			w.forgetClaim(ctx, rec)
			return zero, w.finish(ctx, start, Event{Outcome: OutcomeStoreError, RecordID: id, Err: fmt.Errorf("%w: claim: %w", ErrStore, err)})
		}
		if res.Claimed {
			return w.run(ctx, in, rec, claimStart.Add(budget-reserve(budget)), res.TookOver, start)
		}
		ex := res.Existing
		if err := checkExisting(ex, fp); err != nil {
			outcome := OutcomeRejected
			if errors.Is(err, ErrPayloadMismatch) {
				outcome = OutcomePayloadMismatch
			}
			return zero, w.finish(ctx, start, Event{Outcome: outcome, RecordID: id, Err: err})
		}
		if ex.Status == StatusCompleted {
			return w.replayRecord(ctx, start, ex, fp, false)
		}
		// In progress elsewhere: wait while the wait lasts, the last poll
		// when it ends (a backoff step never overshoots it).
		left := w.cfg.waitMax - waited
		if left <= 0 {
			return zero, w.finish(ctx, start, Event{Outcome: OutcomeInProgress, RecordID: id, Err: ErrInProgress})
		}
		step := min(poll, left)
		if err := w.cfg.sleep(ctx, step); err != nil {
			return zero, w.finish(ctx, start, Event{Outcome: OutcomeInProgress, RecordID: id, Err: fmt.Errorf("%w: %w", ErrInProgress, err)})
		}
		waited += step
		poll = min(2*poll, maxPoll)
	}
}

// forgetClaim undoes, as far as it can, a claim whose outcome is unknown: the
// write may have landed with its response lost and every retry failing, and
// then the key would answer "in progress" for a whole lease though nothing
// ran. The release is fenced by this claim's lease, so it deletes nothing but
// this claim's own record; if it fails too, the lease ends the record.
func (w *wrapper[In, Out]) forgetClaim(ctx context.Context, rec Record) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forgetTimeout)
	defer cancel()
	_ = w.store.Release(fctx, rec.ID, rec.Lease) // best effort; ErrLeaseLost means another owner holds it
}

// checkExisting vets the record that refused a claim before it is used.
func checkExisting(ex *Record, fp string) error {
	switch {
	case ex == nil:
		return fmt.Errorf("%w: store refused the claim without returning the record", ErrCorruptRecord)
	case ex.Version != RecordVersion:
		return fmt.Errorf("%w: record version %d (this library reads %d)", ErrCorruptRecord, ex.Version, RecordVersion)
	case ex.Status != StatusCompleted && ex.Status != StatusInProgress:
		return fmt.Errorf("%w: unknown status %q", ErrCorruptRecord, ex.Status)
	case ex.Status == StatusInProgress && ex.LeaseExpiresAt.IsZero():
		return fmt.Errorf("%w: in-progress record without a lease end", ErrCorruptRecord)
	case fp != ex.Fingerprint && fp != "":
		return ErrPayloadMismatch
	}
	return nil
}

// leaseBudget is how long this invocation may hold the lease: the time to the
// context's deadline (a remaining time of zero is still a deadline), capped by
// the maximum lease. ok is false when no time is left.
func (w *wrapper[In, Out]) leaseBudget(ctx context.Context) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	budget := w.cfg.maxLease
	if deadline, has := ctx.Deadline(); has {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return 0, false
		}
		budget = min(budget, remaining)
	}
	return budget, true
}

// reserve is the part of the budget kept back to complete or release.
func reserve(budget time.Duration) time.Duration {
	return min(DefaultReserve, budget/4)
}

// newRecord builds the INPROGRESS record of a claim. The stored lease ends a
// clock-skew margin after this invocation's budget, and the record never
// expires before its lease.
func (w *wrapper[In, Out]) newRecord(id, fp string, now time.Time, budget time.Duration) Record {
	leaseEnd := now.Add(budget + w.cfg.clockSkew)
	expires := now.Add(w.cfg.expiry)
	if expires.Before(leaseEnd) {
		expires = leaseEnd
	}
	return Record{
		ID:             id,
		Status:         StatusInProgress,
		ExpiresAt:      ceilSecond(expires),
		LeaseExpiresAt: time.UnixMilli(leaseEnd.UnixMilli()),
		Lease:          newLease(),
		Fingerprint:    fp,
		Version:        RecordVersion,
	}
}

func ceilSecond(t time.Time) time.Time {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return time.Unix(s, 0)
}

// run executes the handler under the claimed record, to stop by
// handlerDeadline, and settles the record.
func (w *wrapper[In, Out]) run(ctx context.Context, in In, rec Record, handlerDeadline time.Time, tookOver bool, start time.Time) (Out, error) {
	var zero Out
	// The handler must stop before the lease does: a live owner with a lapsed
	// lease could run side by side with the invocation that takes it over. A
	// handler context born done (a claim so slow that no time is left, or an
	// invocation that ended meanwhile) gives the key back unrun.
	hctx, cancel := context.WithDeadline(&invocationCtx{Context: ctx, recordID: rec.ID, tookOver: tookOver}, handlerDeadline)
	if herr := hctx.Err(); herr != nil {
		cancel()
		ev := Event{Outcome: OutcomeStoreError, RecordID: rec.ID, TookOver: tookOver,
			Err: fmt.Errorf("%w: no time left to run after the claim; the handler did not run: %w", ErrStore, herr)}
		if rerr := w.releaseRecord(ctx, rec); rerr != nil {
			ev.Err = errors.Join(ev.Err, rerr)
		}
		return zero, w.finish(ctx, start, ev)
	}
	settled := false
	defer func() {
		// Only runtime.Goexit in the handler (t.FailNow, say) gets here
		// unsettled: panics are recovered by call. Give the key back.
		if !settled {
			_ = w.releaseRecord(ctx, rec)
		}
	}()
	out, p, err := w.call(hctx, in)
	settled = true
	panicked := p != nil
	cancel()
	ev := Event{RecordID: rec.ID, TookOver: tookOver, HandlerRan: true}

	if panicked || err != nil {
		ev.Outcome, ev.Err = OutcomeHandlerError, err
		if panicked {
			ev.Err = p.err()
			// The re-panic below starts a new stack; keep the original one.
			w.logger().LogAttrs(ctx, slog.LevelError, "idempotent: handler panicked",
				slog.String("record_id", rec.ID), slog.String("panic", fmt.Sprint(p.value)), slog.String("stack", string(p.stack)))
		}
		if rerr := w.releaseRecord(ctx, rec); rerr != nil {
			ev.Outcome, ev.Err = outcomeOfFinish(rerr), errors.Join(ev.Err, rerr)
		}
		w.finish(ctx, start, ev)
		if panicked {
			panic(p.value)
		}
		return out, err
	}

	raw, encErr := w.marshal(out)
	if encErr == nil {
		encErr = w.replayable(out, raw) // a response a replay would not give back equal
	}
	done := rec
	done.Status = StatusCompleted
	done.LeaseExpiresAt = time.Time{}
	done.ExpiresAt = ceilSecond(w.cfg.now().Add(w.cfg.expiry))
	ev.Outcome = OutcomeExecuted
	if encErr != nil {
		encErr = fmt.Errorf("%w: %w", ErrResponseEncoding, encErr)
		done.Data, ev.Outcome, ev.Err = notStoredData, OutcomeNotStored, encErr
	} else {
		done.Data = encodeData(raw, w.cfg.compressAbove)
	}

	cerr := w.completeRecord(ctx, done)
	if errors.Is(cerr, ErrTooLarge) {
		// Never release here: that would let a retry repeat the side effect.
		done.Data, ev.Outcome, ev.Err = notStoredData, OutcomeNotStored, cerr
		cerr = w.completeRecord(ctx, done)
	}
	switch {
	case cerr != nil:
		ev.Outcome, ev.Err = outcomeOfFinish(cerr), errors.Join(ev.Err, cerr)
	case w.cache != nil && ev.Outcome == OutcomeExecuted:
		w.cache.Add(done.ID, done)
	}
	w.finish(ctx, start, ev)
	if encErr != nil {
		return out, encErr
	}
	// The caller keeps its response even when completion failed: the handler
	// ran, and failing now would only invite a retry that repeats it.
	return out, nil
}

func outcomeOfFinish(err error) Outcome {
	if errors.Is(err, ErrLeaseLost) {
		return OutcomeLeaseLost
	}
	return OutcomeStoreError
}

// handlerPanic is a panic recovered from the handler, re-raised after the
// record is released.
type handlerPanic struct {
	value any
	stack []byte
}

// err describes the panic as an error that wraps the panic value when that
// is an error, so outcome hooks can match it with errors.Is and errors.As.
func (p *handlerPanic) err() error {
	if perr, ok := p.value.(error); ok {
		return fmt.Errorf("idempotent: handler panicked: %w", perr)
	}
	return fmt.Errorf("idempotent: handler panicked: %v", p.value)
}

// call runs the handler, turning a panic into a value to re-panic with after
// the record is released.
func (w *wrapper[In, Out]) call(ctx context.Context, in In) (out Out, p *handlerPanic, err error) {
	panicked := true
	defer func() {
		if panicked {
			p = &handlerPanic{value: recover(), stack: debug.Stack()}
		}
	}()
	out, err = w.handler(ctx, in)
	panicked = false
	return out, nil, err
}

// finishContext gives completion and release their own time: the invocation's
// context may be cancelled or spent, and that must not leave the record
// INPROGRESS. SDK retries happen within this bound, which ends with the
// invocation's deadline (the handler stopped a reserve before it) so the
// finish never outlives the Lambda invocation, but always allows a short try.
func finishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := finishTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(deadline), minFinish))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

func (w *wrapper[In, Out]) completeRecord(ctx context.Context, rec Record) error {
	fctx, cancel := finishContext(ctx)
	defer cancel()
	if err := w.store.Complete(fctx, rec); err != nil {
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%w: complete: %w", ErrStore, err)
	}
	return nil
}

func (w *wrapper[In, Out]) releaseRecord(ctx context.Context, rec Record) error {
	fctx, cancel := finishContext(ctx)
	defer cancel()
	if err := w.store.Release(fctx, rec.ID, rec.Lease); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("%w: release: %w", ErrStore, err)
	}
	return nil
}

// marshal encodes a response. A panic in the codec (a MarshalJSON method,
// say) is an encoding error: the record is then completed without the
// response, not left INPROGRESS for a takeover to run the handler again.
func (w *wrapper[In, Out]) marshal(out Out) (raw []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			raw, err = nil, fmt.Errorf("codec panicked: %v", r)
		}
	}()
	return w.cfg.codec.Marshal(out)
}

// unmarshal decodes a stored response; a panic in the codec is an error.
func (w *wrapper[In, Out]) unmarshal(raw []byte) (out Out, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero Out
			out, err = zero, fmt.Errorf("codec panicked: %v", r)
		}
	}()
	err = w.cfg.codec.Unmarshal(raw, &out)
	return out, err
}

// replayRecord answers a duplicate from a completed record.
func (w *wrapper[In, Out]) replayRecord(ctx context.Context, start time.Time, rec *Record, fp string, fromCache bool) (Out, error) {
	var zero Out
	ev := Event{Outcome: OutcomeReplayed, RecordID: rec.ID, FromCache: fromCache}
	if fp != "" && fp != rec.Fingerprint {
		ev.Outcome, ev.Err = OutcomePayloadMismatch, ErrPayloadMismatch
		return zero, w.finish(ctx, start, ev)
	}
	raw, stored, err := decodeData(rec.Data)
	if err != nil {
		ev.Outcome, ev.Err = OutcomeRejected, err
		return zero, w.finish(ctx, start, ev)
	}
	if !stored {
		ev.Outcome, ev.Err = OutcomeResponseNotStored, ErrResponseNotStored
		return zero, w.finish(ctx, start, ev)
	}
	out, err := w.unmarshal(raw)
	if err != nil {
		ev.Outcome, ev.Err = OutcomeRejected, fmt.Errorf("%w: decode response: %w", ErrCorruptRecord, err)
		return zero, w.finish(ctx, start, ev)
	}
	if w.cache != nil && !fromCache {
		w.cache.Add(rec.ID, *rec)
	}
	if w.replay != nil {
		out = w.replay(ctx, out, Replay{RecordID: rec.ID, ExpiresAt: rec.ExpiresAt, FromCache: fromCache})
	}
	w.finish(ctx, start, ev)
	return out, nil
}

// finish reports an invocation's outcome to the hook and the log, and returns
// the event's error for the caller.
func (w *wrapper[In, Out]) finish(ctx context.Context, start time.Time, ev Event) error {
	ev.Duration = w.cfg.now().Sub(start)
	if w.cfg.onOutcome != nil {
		w.cfg.onOutcome(ctx, ev)
	}
	level := outcomeLevel(ev)
	if log := w.logger(); log.Enabled(ctx, level) {
		attrs := make([]slog.Attr, 0, 6)
		attrs = append(attrs,
			slog.String("outcome", ev.Outcome.String()),
			slog.String("record_id", ev.RecordID),
			slog.Bool("handler_ran", ev.HandlerRan),
			slog.Duration("duration", ev.Duration))
		if ev.TookOver {
			attrs = append(attrs, slog.Bool("took_over", true))
		}
		if ev.Err != nil {
			attrs = append(attrs, slog.String("error", ev.Err.Error()))
		}
		log.LogAttrs(ctx, level, "idempotent: "+ev.Outcome.String(), attrs...)
	}
	return ev.Err
}

func outcomeLevel(ev Event) slog.Level {
	switch ev.Outcome {
	case OutcomeExecuted, OutcomeReplayed, OutcomeBypassed:
		if ev.TookOver {
			return slog.LevelWarn
		}
		return slog.LevelDebug
	case OutcomeInProgress, OutcomePayloadMismatch, OutcomeRejected, OutcomeResponseNotStored, OutcomeHandlerError:
		return slog.LevelInfo
	default: // lease lost, store error, response too large to store
		return slog.LevelError
	}
}
