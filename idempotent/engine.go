package idempotent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/idemkit/idemkit/idempotent/internal/envelope"
	"github.com/idemkit/idemkit/idempotent/storage"
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

// errLeaseEnding is the cause of the work context's end at its deadline: the
// lease ends a reserve later. It wraps context.DeadlineExceeded.
var errLeaseEnding = fmt.Errorf("idempotent: the handler's time is up: its lease ends soon: %w", context.DeadlineExceeded)

// Engine is the byte-level idempotency engine every front door calls through
// [Engine.Do]: Wrap, the nethttp middleware, the apigateway adapter, the batch
// adapters, and front doors of your own. It
// derives the record id, claims it, runs the work under a lease, stores or
// releases, replays, waits, caches, coalesces concurrent calls for one
// record in this process, and reports each call's outcome. It knows nothing of types: the work
// returns its response encoded, and a replay returns the stored bytes.
//
// An Engine is safe for concurrent use; create one per front door, at
// start-up, and share it.
type Engine struct {
	cfg   config
	store storage.Store
	steps storage.StepStore                  // store, when it records steps; else nil
	txs   storage.TxStore                    // store, when it commits handlers' writes; else nil
	cache *lru.Cache[string, storage.Record] // nil without WithLocalCache

	mu      sync.Mutex
	flights map[string]*flight // record id -> the call of this process that holds it
}

// logAttrsKey is the context key of the Call.Attrs of the call under way.
type logAttrsKey struct{}

// withLogAttrs returns ctx carrying attrs for the Engine's log lines.
func withLogAttrs(ctx context.Context, attrs []slog.Attr) context.Context {
	if len(attrs) == 0 {
		return ctx
	}
	return context.WithValue(ctx, logAttrsKey{}, attrs)
}

// logAttrs appends to attrs the Call.Attrs that ctx carries.
func logAttrs(ctx context.Context, attrs []slog.Attr) []slog.Attr {
	extra, _ := ctx.Value(logAttrsKey{}).([]slog.Attr)
	return append(attrs, extra...)
}

// job is one call on its way through the engine.
type job struct {
	id, fp string
	start  time.Time
	r      runner
	f      *flight // the flight this call leads: own, once it leads
	own    flight
	fn     funcs // r, for Engine.Do
	// followed says the call waited on another's flight before it led: its
	// start is no longer a fresh reading of the clock.
	followed bool
	// pre, when set, is the claim a Batch made for this call in its wave:
	// claimAndRun's first round uses it instead of claiming afresh.
	pre *waveClaim
	// batch, when set, completes the record after the work succeeded
	// (Batch.Do): the next call's work need not wait for it.
	batch  *Batch
	queued bool // batch took the completion over
}

// runState is what run keeps for the work's duration with a store that
// has transactions: its invocation context and transaction slot, in one
// allocation where they took two (kept out of job, which a replay
// allocates too).
type runState struct {
	ictx invocationCtx
	tx   txRun
}

// result is the answer of do: the encoded response (the work's, or the
// stored one replayed), whether this call ran the work, and the stored
// response's facts when it did not, for ReplayMarker.
type result struct {
	response []byte
	ran      bool
	replay   Replay
}

// New returns an Engine over store, configured by opts: the core settings
// (prefix, expiry, leases, waiting, cache, codec, logger, outcome hooks) that
// every front door given this Engine shares. New panics on a nil store and
// on an invalid prefix: programmer errors, found at start-up.
//
// Every front door takes an Engine: Wrap, the adapter packages, and a front
// door of your own (it calls [Engine.Do]). Make one at start-up
// and share it; records of front doors that share an Engine share its
// prefix, so give unrelated handlers in one process their own Engine, or
// their own scope.
func New(store storage.Store, opts ...Option) *Engine {
	if store == nil || (reflect.ValueOf(store).Kind() == reflect.Pointer && reflect.ValueOf(store).IsNil()) {
		panic("idempotent: New: nil store")
	}
	e := &Engine{cfg: defaultConfig(), store: store}
	e.steps, _ = store.(storage.StepStore)
	e.txs, _ = store.(storage.TxStore)
	for _, opt := range opts {
		opt(&e.cfg)
	}
	checkPrefix(e.cfg.prefix, e.cfg.prefixFromEnv)
	if e.cfg.cacheSize > 0 {
		e.cache, _ = lru.New[string, storage.Record](e.cfg.cacheSize) // size > 0: no error
	}
	if e.cfg.disabled {
		e.logger().Warn("idempotent: " + disableEnv + " is set: handlers run without idempotency (never do this in production)")
	}
	return e
}

// checkPrefix refuses, at start-up, a prefix some store could not hold:
// empty, too long, or not text by package storage's rule (valid UTF-8
// without NUL). fromEnv: the prefix is the default, AWS_LAMBDA_FUNCTION_NAME.
func checkPrefix(prefix string, fromEnv bool) {
	var fault string
	switch {
	case prefix == "":
		panic("idempotent: WithPrefix: empty prefix") // the default never is
	case len(prefix) > maxPrefixBytes:
		fault = fmt.Sprintf("of %d bytes (at most %d)", len(prefix), maxPrefixBytes)
	case !utf8.ValidString(prefix):
		fault = "is not valid UTF-8"
	case strings.IndexByte(prefix, 0) >= 0:
		fault = "holds a NUL byte"
	default:
		return
	}
	if fromEnv {
		panic("idempotent: New: the default prefix, AWS_LAMBDA_FUNCTION_NAME, " + fault + ": give one with WithPrefix")
	}
	panic("idempotent: WithPrefix: prefix " + fault)
}

// RecordID returns the id of the record that holds key within scope under
// prefix: prefix, '#', and the SHA-256 (hex) of the three parts, each length
// prefixed so that ("a","bc") and ("ab","c") never collide. Every front door
// derives its records' ids this way, so logs and tools can name a record from
// a raw key. There is no inverse: the hash hides the key and scope.
func RecordID(prefix, scope, key string) string { return recordID(prefix, scope, key) }

// logger returns the Engine's logger: WithLogger's, else slog.Default().
func (e *Engine) logger() *slog.Logger {
	if e.cfg.logger != nil {
		return e.cfg.logger
	}
	return slog.Default()
}

// A runner is the work of one call and the check of a replay (Call.Accept).
// Wrap's invocations implement it themselves: one allocation for both.
type runner interface {
	run(ctx context.Context) ([]byte, error)
	accept(response []byte) error
}

// funcs is the runner of Engine.Do's arguments.
type funcs struct {
	work     func(context.Context) ([]byte, error)
	acceptFn func([]byte) error
}

func (f funcs) run(ctx context.Context) ([]byte, error) { return f.work(ctx) }

func (f funcs) accept(response []byte) error {
	if f.acceptFn == nil {
		return nil
	}
	return f.acceptFn(response)
}

// do runs a call for r, or for fn when r is nil: the job then holds fn, so that
// making it a runner costs no allocation of its own.
func (e *Engine) do(ctx context.Context, call *Call, r runner, fn funcs) (result, error) {
	start := e.cfg.now()
	if e.tracing() {
		ctx = e.startCall(ctx, call)
	}
	ctx = withLogAttrs(ctx, call.Attrs)
	if r == nil && (e.cfg.disabled || call.Key == "") {
		r = fn
	}
	if e.cfg.disabled {
		return e.bypass(ctx, start, r)
	}
	if call.Key == "" {
		if e.cfg.optionalKey {
			return e.bypass(ctx, start, r)
		}
		return result{}, e.finish(ctx, start, Event{Outcome: OutcomeRejected, Err: ErrMissingKey})
	}
	if err := checkKey(call.Key); err != nil {
		return result{}, e.finish(ctx, start, Event{Outcome: OutcomeRejected, Err: err})
	}
	id := recordID(e.cfg.prefix, call.Scope, call.Key)
	var fp string
	if call.Payload != nil {
		var err error
		if fp, err = fingerprint(call.Payload); err != nil {
			return result{}, e.finish(ctx, start, Event{Outcome: OutcomeRejected, RecordID: id, Err: fmt.Errorf("%w: %w", ErrInvalidPayload, err)})
		}
	}
	j := &job{id: id, fp: fp, start: start, r: r}
	if r == nil {
		j.fn = fn
		j.r = &j.fn
	}
	if e.cache != nil {
		if rec, ok := e.cache.Get(id); ok && !rec.Expired(start) {
			return e.replayRecord(ctx, j, &rec, true)
		}
	}
	return e.coalesce(ctx, j)
}

// notStored returns the error a work function returns when it ran (its side
// effects happened) but its response cannot be stored (Engine.NotStored
// says what follows). It is bound to e: returned through another Engine's
// work, it is an ordinary failure there.
func (e *Engine) notStored(reason error) error {
	return &encodingError{engine: e, err: fmt.Errorf("%w: %w", ErrResponseEncoding, reason)}
}

// reject reports a call refused before do (Engine.Reject) and returns
// err.
func (e *Engine) reject(ctx context.Context, call *Call, err error) error {
	ev := Event{Outcome: OutcomeRejected, Err: err}
	if call.Key != "" && checkKey(call.Key) == nil {
		ev.RecordID = recordID(e.cfg.prefix, call.Scope, call.Key)
	}
	if e.tracing() {
		ctx = e.startCall(ctx, call)
	}
	return e.finish(withLogAttrs(ctx, call.Attrs), e.cfg.now(), ev)
}

func (e *Engine) bypass(ctx context.Context, start time.Time, r runner) (result, error) {
	rctx, txr := e.withTx(ctx, "", "")
	data, err := r.run(rctx)
	if tx := txr.end(); tx != nil {
		// No record to complete: the handler's writes commit alone, and a
		// caller whose writes did not commit gets no success.
		if err != nil {
			err = errors.Join(err, e.rollback(ctx, tx))
		} else if cerr := e.commitAlone(ctx, tx); cerr != nil {
			e.finish(ctx, start, Event{Outcome: OutcomeBypassed, HandlerRan: true, Err: cerr})
			return result{}, cerr
		}
	}
	e.finish(ctx, start, Event{Outcome: OutcomeBypassed, HandlerRan: true, Err: err})
	return result{response: data, ran: true}, err
}

// commitAlone commits the writes of a run without a record.
func (e *Engine) commitAlone(ctx context.Context, tx storage.Tx) error {
	fctx, cancel := finishContext(ctx)
	defer cancel()
	err := tx.Commit(fctx, storage.Record{})
	if err != nil && !errors.Is(err, storage.ErrTxAborted) && !errors.Is(err, storage.ErrTxRefused) {
		return fmt.Errorf("%w: commit the handler's writes: %w", ErrStore, err)
	}
	return err
}

// claimAndRun claims id and runs the work, or answers from the record that
// refused the claim. With WithWaitInProgress it polls an in-progress record by
// claiming again, so a poll costs one store call and needs no read permission.
func (e *Engine) claimAndRun(ctx context.Context, j *job) (result, error) {
	id, fp, start := j.id, j.fp, j.start
	var waited time.Duration
	poll := firstPoll
	now := start // a first claim straight from Do counts from the call's start: one clock read less
	if j.followed {
		now = e.cfg.now()
	}
	for ; ; now = e.cfg.now() {
		// The work's deadline is measured from here, no later than the
		// instant the lease is computed from, so a slow claim shortens the
		// work's time instead of letting it outlive the lease.
		claimStart := now
		if e.cfg.clockSet {
			claimStart = time.Now()
		}
		budget, ok := e.leaseBudget(ctx)
		if !ok {
			err := ctx.Err()
			if err == nil {
				err = context.DeadlineExceeded
			}
			return result{}, e.finish(ctx, start, Event{Outcome: OutcomeStoreError, RecordID: id, Err: fmt.Errorf("%w: no time left to run: %w", ErrStore, err)})
		}
		var rec storage.Record
		var res storage.ClaimResult
		var err error
		if pre := j.pre; pre != nil {
			// The wave's claim, and the time its lease was computed from.
			j.pre = nil // a poll after it claims afresh
			rec, claimStart, budget = pre.rec, pre.at, pre.budget
			res, err = pre.res, pre.err
			if pre.again {
				// Its answer was lost: claim it again, as its owner,
				// so a claim that landed counts.
				res, err = e.store.Claim(ctx, rec, now)
			}
		} else {
			rec = e.newRecord(id, fp, now, budget)
			res, err = e.store.Claim(ctx, rec, now)
		}
		if e.tracing() {
			e.progress(ctx, Progress{Stage: StageClaim, Claimed: res.Claimed, TookOver: res.TookOver, Resumed: res.Resumed, Steps: len(res.Steps), Err: err})
		}
		if err != nil {
			if errors.Is(err, ErrCorruptRecord) {
				return result{}, e.finish(ctx, start, Event{Outcome: OutcomeRejected, RecordID: id, Err: err})
			}
			e.forgetClaim(ctx, rec)
			return result{}, e.finish(ctx, start, Event{Outcome: OutcomeStoreError, RecordID: id, Err: fmt.Errorf("%w: claim: %w", ErrStore, err)})
		}
		if res.Claimed {
			j.f.hold(&rec)
			return e.run(ctx, j, rec, claimStart.Add(budget-reserve(budget)), res)
		}
		j.f.settle()
		ex := res.Existing
		if err := checkExisting(ex, fp); err != nil {
			outcome := OutcomeRejected
			if errors.Is(err, ErrPayloadMismatch) {
				outcome = OutcomePayloadMismatch
			}
			return result{}, e.finish(ctx, start, Event{Outcome: outcome, RecordID: id, Err: err})
		}
		if ex.Status == storage.StatusCompleted {
			r, err := e.replayRecord(ctx, j, ex, false)
			if err == nil {
				j.f.share(&r, ex.Fingerprint)
			}
			return r, err
		}
		// In progress elsewhere: wait while the wait lasts, the last poll
		// when it ends (a backoff step never overshoots it).
		left := e.cfg.waitMax - waited
		if left <= 0 {
			return result{}, e.finish(ctx, start, Event{Outcome: OutcomeInProgress, RecordID: id, Err: ErrInProgress})
		}
		step := min(poll, left)
		if e.tracing() {
			e.progress(ctx, Progress{Stage: StageWait, Wait: step})
		}
		if err := e.cfg.sleep(ctx, step); err != nil {
			return result{}, e.finish(ctx, start, Event{Outcome: OutcomeInProgress, RecordID: id, Err: fmt.Errorf("%w: %w", ErrInProgress, err)})
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
func (e *Engine) forgetClaim(ctx context.Context, rec storage.Record) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forgetTimeout)
	defer cancel()
	_ = e.store.Release(fctx, rec.ID, rec.Lease) // best effort; storage.ErrLeaseLost means another owner holds it
}

// checkExisting vets the record that refused a claim before it is used.
func checkExisting(ex *storage.Record, fp string) error {
	switch {
	case ex == nil:
		return fmt.Errorf("%w: store refused the claim without returning the record", ErrCorruptRecord)
	case ex.Version != storage.RecordVersion:
		return fmt.Errorf("%w: record version %d (this library reads %d)", ErrCorruptRecord, ex.Version, storage.RecordVersion)
	case ex.Status != storage.StatusCompleted && ex.Status != storage.StatusInProgress:
		return fmt.Errorf("%w: unknown status %q", ErrCorruptRecord, ex.Status)
	case ex.Status == storage.StatusInProgress && ex.LeaseExpiresAt.IsZero():
		return fmt.Errorf("%w: in-progress record without a lease end", ErrCorruptRecord)
	case fp != ex.Fingerprint && fp != "":
		return ErrPayloadMismatch
	}
	return nil
}

// leaseBudget is how long this invocation may hold the lease: the time to the
// context's deadline (a remaining time of zero is still a deadline), capped by
// the maximum lease. ok is false when no time is left.
func (e *Engine) leaseBudget(ctx context.Context) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	budget := e.cfg.maxLease
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
	return min(maxReserve, budget/4)
}

// newRecord builds the INPROGRESS record of a claim. The stored lease ends a
// clock-skew margin after this invocation's budget, and the record never
// expires before its lease.
func (e *Engine) newRecord(id, fp string, now time.Time, budget time.Duration) storage.Record {
	leaseEnd := now.Add(budget + e.cfg.clockSkew)
	expires := now.Add(e.cfg.expiry)
	if expires.Before(leaseEnd) {
		expires = leaseEnd
	}
	// Held past the lease for WithTakeoverDelay, never past the expiry:
	// clamped durations keep the sum far from overflow.
	if e.cfg.takeoverDelay > 0 {
		leaseEnd = leaseEnd.Add(e.cfg.takeoverDelay)
		if leaseEnd.After(expires) {
			leaseEnd = ceilSecond(expires)
		}
	}
	return storage.Record{
		ID:             id,
		Status:         storage.StatusInProgress,
		ExpiresAt:      ceilSecond(expires),
		LeaseExpiresAt: time.UnixMilli(leaseEnd.UnixMilli()),
		Lease:          newLease(),
		Fingerprint:    fp,
		Version:        storage.RecordVersion,
	}
}

func ceilSecond(t time.Time) time.Time {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return time.Unix(s, 0)
}

// run executes the work under the claimed record, to stop by workDeadline,
// and settles the record.
func (e *Engine) run(ctx context.Context, j *job, rec storage.Record, workDeadline time.Time, claim storage.ClaimResult) (result, error) {
	start := j.start
	// The work must stop before the lease does: a live owner with a lapsed
	// lease could run side by side with the invocation that takes it over. A
	// context born done (a claim so slow that no time is left, or an
	// invocation that ended meanwhile) gives the key back unrun.
	ictx, slot := new(invocationCtx), (*txRun)(nil)
	if e.txs != nil {
		st := new(runState)
		ictx, slot = &st.ictx, &st.tx
	}
	*ictx = invocationCtx{Context: ctx, recordID: rec.ID, tookOver: claim.TookOver, resumed: claim.Resumed,
		steps: stepLog{e: e, id: rec.ID, lease: rec.Lease, resumed: claim.Steps}}
	rctx, txr := e.withTxIn(ictx, slot, rec.ID, rec.Lease)
	wctx, cancel := context.WithDeadlineCause(rctx, workDeadline, errLeaseEnding)
	if werr := wctx.Err(); werr != nil {
		cancel()
		ev := Event{Outcome: OutcomeStoreError, RecordID: rec.ID, TookOver: claim.TookOver, Resumed: claim.Resumed,
			Err: fmt.Errorf("%w: no time left to run after the claim; the handler did not run: %w", ErrStore, werr)}
		if rerr := e.giveBack(ctx, rec, &ictx.steps); rerr != nil {
			ev.Err = errors.Join(ev.Err, rerr)
		}
		return result{}, e.finish(ctx, start, ev)
	}
	settled := false
	defer func() {
		// Only runtime.Goexit in the work (t.FailNow, say) gets here
		// unsettled: panics are recovered by call. Give the key back.
		if !settled {
			ictx.steps.end()
			_ = e.rollback(ctx, txr.end())
			_ = e.giveBack(ctx, rec, &ictx.steps)
		}
	}()
	data, p, err := call(wctx, j.r)
	settled = true
	cancel()
	if e.tracing() {
		e.progress(ctx, runProgress(p, err))
	}
	tx := txr.end()
	// A run that succeeded without taking a step its record held took a
	// different path, or the step was renamed or removed by a deployment
	// since it ran: say so, since a renamed step ran again.
	if untaken := ictx.steps.end(); untaken != nil && p == nil && err == nil {
		e.logger().LogAttrs(ctx, slog.LevelWarn, "idempotent: the handler succeeded without taking steps its record held",
			logAttrs(ctx, []slog.Attr{slog.String("record_id", rec.ID), slog.Any("steps", untaken)})...)
	}
	res := result{response: data, ran: true}
	ev := Event{RecordID: rec.ID, TookOver: claim.TookOver, Resumed: claim.Resumed, HandlerRan: true}
	encErr := err != nil && e.notStoredBy(err)

	if p != nil || (err != nil && !encErr) {
		ev.Outcome, ev.Err = OutcomeHandlerError, err
		if p != nil {
			ev.Err = p.err()
			// The re-panic below starts a new stack; keep the original one.
			e.logger().LogAttrs(ctx, slog.LevelError, "idempotent: handler panicked", logAttrs(ctx, []slog.Attr{
				slog.String("record_id", rec.ID), slog.String("panic", fmt.Sprint(p.value)), slog.String("stack", string(p.stack))})...)
		}
		if rerr := e.rollback(ctx, tx); rerr != nil {
			ev.Err = errors.Join(ev.Err, rerr)
		}
		if rerr := e.giveBack(ctx, rec, &ictx.steps); rerr != nil {
			ev.Outcome, ev.Err = outcomeOfFinish(rerr), errors.Join(ev.Err, rerr)
		}
		e.finish(ctx, start, ev)
		if p != nil {
			panic(p.value)
		}
		return res, err
	}

	done := rec
	done.Status = storage.StatusCompleted
	done.LeaseExpiresAt = time.Time{}
	if e.tracing() {
		done.Trace = e.recordTrace(ctx)
	}
	ev.Outcome = OutcomeExecuted
	if encErr {
		done.Data, ev.Outcome, ev.Err = envelope.NotStored, OutcomeNotStored, err
	} else {
		done.Data = envelope.Encode(data, e.cfg.compressAbove)
	}
	now := e.cfg.now()
	done.ExpiresAt = ceilSecond(now.Add(e.cfg.expiry))
	finishStart := now // the real clock's reading serves the finish too
	if e.cfg.clockSet {
		finishStart = time.Now()
	}

	if j.batch != nil && tx == nil {
		// In a batch, the completion goes out while the next call's work
		// runs; the Batch reports its outcome once it lands. The caller's
		// answer does not depend on it (see below).
		j.batch.complete(ctx, j, done, ev, data, finishStart)
		if encErr {
			return res, err
		}
		return res, nil
	}
	cerr := e.completeRecord(ctx, done, finishStart, tx)
	return e.completed(ctx, j, done, &ictx.steps, tx, ev, data, cerr, res, err, encErr)
}

// completed settles a run whose completion returned cerr: it stores the
// record without a response when it is too large, decides an unknown commit,
// caches and shares what was stored, reports the outcome, and returns the
// run's answer (res and err, the work's).
func (e *Engine) completed(ctx context.Context, j *job, done storage.Record, steps *stepLog, tx storage.Tx, ev Event, data []byte, cerr error, res result, err error, encErr bool) (result, error) {
	rec := done // the claim's id and lease: all that settle and uncommitted read
	if errors.Is(cerr, storage.ErrTooLarge) {
		// Never release here: that would let a retry repeat the side effect.
		done.Data, ev.Outcome, ev.Err = envelope.NotStored, OutcomeNotStored, cerr
		cerr = e.completeRecord(ctx, done, time.Now(), tx)
	}
	if tx != nil && cerr != nil && isUnknownCommit(cerr) {
		cerr = e.settle(ctx, rec, steps, tx, cerr)
	}
	if tx != nil && cerr != nil {
		return e.uncommitted(ctx, j, rec, steps, tx, ev, cerr)
	}
	switch {
	case cerr != nil:
		ev.Outcome, ev.Err = outcomeOfFinish(cerr), errors.Join(ev.Err, cerr)
	case ev.Outcome == OutcomeExecuted:
		if e.cache != nil {
			e.cache.Add(done.ID, done)
		}
		// Waiters in this process share the stored response.
		j.f.share(&result{response: data, replay: Replay{RecordID: done.ID, ExpiresAt: done.ExpiresAt}}, done.Fingerprint) // copied: no allocation
	}
	e.finish(ctx, j.start, ev)
	if encErr {
		return res, err
	}
	// The caller keeps its response even when completion failed: the work
	// ran, and failing now would only invite a retry that repeats it.
	return res, nil
}

// encodingError is Wrap's word that the handler ran but its response cannot
// be stored: the record is then completed without one, so a duplicate gets
// ErrResponseNotStored instead of running the handler again. It names its
// engine: an inner wrapped function's encodingError, returned by an outer
// handler, is a plain handler error to the outer one.
type encodingError struct {
	engine *Engine
	err    error // wraps ErrResponseEncoding
}

// notStoredBy reports whether err is e's own word that the work ran but its
// response cannot be stored (not an inner Wrap's, returned by an outer
// handler).
func (e *Engine) notStoredBy(err error) bool {
	var ee *encodingError
	return errors.As(err, &ee) && ee.engine == e
}

func (x *encodingError) Error() string { return x.err.Error() }
func (x *encodingError) Unwrap() error { return x.err }

func outcomeOfFinish(err error) Outcome {
	if errors.Is(err, storage.ErrLeaseLost) {
		return OutcomeLeaseLost
	}
	return OutcomeStoreError
}

// handlerPanic is a panic recovered from the work, re-raised after the
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

// call runs the work, turning a panic into a value to re-panic with after
// the record is released.
func call(ctx context.Context, r runner) (data []byte, p *handlerPanic, err error) {
	panicked := true
	defer func() {
		if panicked {
			p = &handlerPanic{value: recover(), stack: debug.Stack()}
		}
	}()
	data, err = r.run(ctx)
	panicked = false
	return data, nil, err
}

// finishContext gives completion and release their own time: the invocation's
// context may be cancelled or spent, and that must not leave the record
// INPROGRESS. SDK retries happen within this bound, which ends with the
// invocation's deadline (the work stopped a reserve before it) so the
// finish never outlives the Lambda invocation, but always allows a short try.
func finishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return finishContextAt(ctx, time.Now())
}

// finishContextAt is finishContext from now, a reading of the real clock
// just taken.
func finishContextAt(ctx context.Context, now time.Time) (context.Context, context.CancelFunc) {
	timeout := finishTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(deadline.Sub(now), minFinish))
	}
	return context.WithDeadline(context.WithoutCancel(ctx), now.Add(timeout))
}

// completeRecord stores rec, with a finish context from start (a reading of
// the real clock): with the handler's writes when the run began a
// transaction, else alone.
func (e *Engine) completeRecord(ctx context.Context, rec storage.Record, start time.Time, tx storage.Tx) error {
	fctx, cancel := finishContextAt(ctx, start)
	defer cancel()
	var err error
	if tx != nil {
		err = tx.Commit(fctx, rec)
	} else {
		err = e.store.Complete(fctx, rec)
	}
	if e.tracing() {
		e.progress(ctx, Progress{Stage: StageCommit, Err: err})
	}
	if err != nil {
		if !isUnknownCommit(err) {
			return err
		}
		return fmt.Errorf("%w: complete: %w", ErrStore, err)
	}
	return nil
}

// isUnknownCommit reports whether err, a completion's or a commit's, leaves
// its outcome unknown: every error but the ones storage.Tx names as
// deciding it.
func isUnknownCommit(err error) bool {
	for _, known := range []error{storage.ErrLeaseLost, storage.ErrTooLarge, storage.ErrTxAborted, storage.ErrTxRefused, storage.ErrAlreadyCompleted} {
		if errors.Is(err, known) {
			return false
		}
	}
	return true
}

// settle decides a commit whose outcome is unknown (cerr) by the record's
// own fence, in one store call: it gives the record back under the run's
// lease (Release, or Suspend when the record holds steps), conditioned on
// INPROGRESS, which orders it after any commit still in flight (a DynamoDB
// transaction conditioned on the record fails once the record is given back;
// PostgreSQL's DELETE waits for a COMMIT holding the row). It returns
//   - nil when the record is COMPLETED under the run's lease: the commit
//     landed and the run succeeded;
//   - cerr, noting the settle, when the record was given back: nothing of
//     the run committed or can, and a retry runs the handler at once;
//   - an error wrapping storage.ErrLeaseLost when another owner holds the
//     record (nothing of this run committed);
//   - cerr joined with the settle's error when the settle failed too: only
//     then is the record left to its lease.
//
// The rule is stated for users in docs/transactions.md.
func (e *Engine) settle(ctx context.Context, rec storage.Record, steps *stepLog, tx storage.Tx, cerr error) error {
	_ = e.rollback(ctx, tx) // the writes are the database's now, or never: nothing to keep
	serr := e.giveBack(ctx, rec, steps)
	switch {
	case errors.Is(serr, storage.ErrAlreadyCompleted):
		return nil
	case serr == nil:
		return fmt.Errorf("%w; settled: nothing committed and the record was given back, so a retry runs the handler at once", cerr)
	case errors.Is(serr, storage.ErrLeaseLost):
		return serr
	}
	return fmt.Errorf("%w; the settling write failed too, so the record is left to its lease: %w", cerr, serr)
}

// uncommitted settles a run whose transaction did not commit (cerr), so the
// caller gets what a retry would get and never a success whose writes are not
// in the database:
//   - the handler's writes were refused (storage.ErrTxAborted), or the
//     database refused the request (storage.ErrTxRefused): nothing
//     committed; the record is given back as after a handler error and the
//     caller gets cerr, which says which write failed or why the request
//     was refused;
//   - the lease was lost: the new owner's writes are the only ones; the caller
//     gets ErrInProgress, as a retry would until the new owner completes;
//   - the store failed and settle could not find the record COMPLETED under
//     the run's lease: the record was given back (or, if the settle failed
//     too, is left to its lease); the caller gets ErrStore.
func (e *Engine) uncommitted(ctx context.Context, j *job, rec storage.Record, steps *stepLog, tx storage.Tx, ev Event, cerr error) (result, error) {
	ev.Err = cerr
	err := cerr
	switch {
	case errors.Is(cerr, storage.ErrTxAborted) || errors.Is(cerr, storage.ErrTxRefused):
		ev.Outcome = OutcomeHandlerError
		if rerr := e.rollback(ctx, tx); rerr != nil {
			ev.Err = errors.Join(ev.Err, rerr)
		}
		if rerr := e.giveBack(ctx, rec, steps); rerr != nil {
			ev.Outcome, ev.Err = outcomeOfFinish(rerr), errors.Join(ev.Err, rerr)
		}
	case errors.Is(cerr, storage.ErrLeaseLost):
		ev.Outcome = OutcomeLeaseLost
		err = fmt.Errorf("%w: the lease was lost before the handler's writes committed; nothing of this run committed: %w", ErrInProgress, cerr)
		_ = e.rollback(ctx, tx)
	default:
		ev.Outcome = OutcomeStoreError
		_ = e.rollback(ctx, tx)
	}
	e.finish(ctx, j.start, ev)
	return result{}, err
}

// giveBack undoes a claim whose work did not finish: it deletes the record,
// unless the record holds finished steps; then it keeps them and only ends
// the lease (Suspend), so the next claim for the same payload resumes after
// them at once. Either way one store call.
func (e *Engine) giveBack(ctx context.Context, rec storage.Record, steps *stepLog) error {
	if !steps.holds() {
		return e.releaseRecord(ctx, rec)
	}
	fctx, cancel := finishContextAt(ctx, time.Now())
	defer cancel()
	// A millisecond back, so that a retry at once is not refused as in
	// progress by a lease that ends in the same millisecond.
	err := e.steps.Suspend(fctx, rec.ID, rec.Lease, e.cfg.now().Add(-time.Millisecond))
	if e.tracing() {
		e.progress(ctx, Progress{Stage: StageGiveBack, Err: err})
	}
	if err != nil {
		if errors.Is(err, storage.ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("%w: suspend: %w", ErrStore, err)
	}
	return nil
}

func (e *Engine) releaseRecord(ctx context.Context, rec storage.Record) error {
	fctx, cancel := finishContextAt(ctx, time.Now())
	defer cancel()
	err := e.store.Release(fctx, rec.ID, rec.Lease)
	if e.tracing() {
		e.progress(ctx, Progress{Stage: StageGiveBack, Err: err})
	}
	if err != nil {
		if errors.Is(err, storage.ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("%w: release: %w", ErrStore, err)
	}
	return nil
}

// replayRecord answers a duplicate from a completed record.
func (e *Engine) replayRecord(ctx context.Context, j *job, rec *storage.Record, fromCache bool) (result, error) {
	start := j.start
	ev := Event{Outcome: OutcomeReplayed, RecordID: rec.ID, FromCache: fromCache, Trace: rec.Trace}
	if j.fp != "" && j.fp != rec.Fingerprint {
		ev.Outcome, ev.Err = OutcomePayloadMismatch, ErrPayloadMismatch
		return result{}, e.finish(ctx, start, ev)
	}
	raw, stored, err := rec.Response()
	if err != nil {
		ev.Outcome, ev.Err = OutcomeRejected, err
		return result{}, e.finish(ctx, start, ev)
	}
	if !stored {
		ev.Outcome, ev.Err = OutcomeResponseNotStored, ErrResponseNotStored
		return result{}, e.finish(ctx, start, ev)
	}
	if err := j.r.accept(raw); err != nil {
		ev.Outcome, ev.Err = OutcomeRejected, fmt.Errorf("%w: decode response: %w", ErrCorruptRecord, err)
		return result{}, e.finish(ctx, start, ev)
	}
	if e.cache != nil {
		if !fromCache {
			e.cache.Add(rec.ID, *rec)
		}
		// raw may be part of the cached record: the caller gets its own.
		raw = bytes.Clone(raw)
	}
	e.finish(ctx, start, ev)
	return result{response: raw, replay: Replay{RecordID: rec.ID, ExpiresAt: rec.ExpiresAt}}, nil
}

// finish reports a call's outcome to the hook and the log, and returns the
// event's error for the caller.
func (e *Engine) finish(ctx context.Context, start time.Time, ev Event) error {
	level, log := outcomeLevel(ev), e.logger()
	logs := log.Enabled(ctx, level)
	if len(e.cfg.hooks) == 0 && !logs && !e.tracing() {
		return ev.Err // no one to tell: not even a clock read
	}
	ev.Duration = e.cfg.now().Sub(start)
	for _, hook := range e.cfg.hooks {
		hook(ctx, ev)
	}
	if e.tracing() {
		e.endCall(ctx, ev)
	}
	if logs {
		attrs := make([]slog.Attr, 0, 7)
		attrs = append(attrs,
			slog.String("outcome", ev.Outcome.String()),
			slog.String("record_id", ev.RecordID),
			slog.Bool("handler_ran", ev.HandlerRan),
			slog.Duration("duration", ev.Duration))
		if ev.TookOver {
			attrs = append(attrs, slog.Bool("took_over", true))
		}
		if ev.Resumed {
			attrs = append(attrs, slog.Bool("resumed", true))
		}
		if ev.Shared {
			attrs = append(attrs, slog.Bool("shared", true))
		}
		if ev.Err != nil {
			attrs = append(attrs, slog.String("error", ev.Err.Error()))
		}
		attrs = logAttrs(ctx, attrs)
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
