package idempotent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// waveConcurrency bounds the single store calls a wave makes at once on a
// store without the many-records capabilities (storage.ClaimManyStore,
// storage.FinishManyStore): its claims, its completions in flight, its
// give-backs. Each call in flight may hold a connection of the store's.
const waveConcurrency = 32

// A Batch is a set of calls whose records were claimed together, in one
// wave ([Engine.ClaimBatch]), for a front door that answers many calls per
// event: a stream's or a queue's batch. Its calls then run one by one with
// [Batch.Do], in whatever order the front door keeps, each exactly as
// [Engine.Do] would run it, but without the claim's round trip (the wave
// made it), and without waiting for its completion: the record is completed
// while the next call's work runs, and completions that queue up meanwhile
// are written together. [Batch.Close] waits for them and gives back, in one
// wave, every claim no call ran.
//
// A Batch is safe for concurrent use by the goroutines that run its calls.
type Batch struct {
	e      *Engine
	calls  []Call
	ids    []string              // per call: its record id, "" when the wave did not look at it
	fps    []string              // per call with an id: its payload's fingerprint
	claims map[string]*waveClaim // by record id: one claim per distinct id

	mu       sync.Mutex
	queue    []completion // completions waiting for a writer
	writers  int          // goroutines writing completions (see complete)
	inflight sync.WaitGroup
}

// waveClaim is one record's claim in a Batch's wave.
type waveClaim struct {
	rec    storage.Record
	res    storage.ClaimResult
	err    error         // the claim failed (wrapping ErrCorruptRecord: the stored record cannot be read)
	again  bool          // err left the claim's outcome unknown: the call claims it again, as its owner
	at     time.Time     // the real clock's reading before the wave: the work's deadline counts from it
	budget time.Duration // the lease budget the record was claimed with

	// Under Batch.mu:
	taken   bool          // a call runs under this claim (or ran)
	settled chan struct{} // made when taken, closed once that call is answered and its completion landed
}

// completion is a record whose work succeeded, waiting to be completed.
type completion struct {
	ctx   context.Context
	j     *job
	done  storage.Record
	ev    Event
	data  []byte
	start time.Time // the real clock's reading for the finish context
}

// ClaimBatch claims, in one wave, the record of every call that has a valid
// key (once per distinct record: duplicates share the first one's claim),
// and returns the Batch whose [Batch.Do] runs them. On a
// [storage.ClaimManyStore] the wave is one ClaimMany call (one round trip on
// Redis and PostgreSQL); on another store, concurrent single claims. Each
// record is claimed exactly as [Engine.Do] would claim it: the claim wave
// decides nothing Do would not, it only decides it sooner. Calls the wave
// does not claim (no key, an invalid one, a payload that cannot be hashed,
// a response in the local cache, an Engine that is [Engine.Disabled]) are
// run by Batch.Do as by Engine.Do, which then answers them.
//
// The claims hold their records in progress until their calls run, so run
// them soon, and always call [Batch.Close]: a claim no call ran is given back
// there; if the process dies first, the claim's lease (which ends with ctx's
// deadline, as for Engine.Do) lets the next invocation take it over.
//
// calls is the Batch's: do not change it while the Batch is in use.
func (e *Engine) ClaimBatch(ctx context.Context, calls []Call) *Batch {
	b := &Batch{e: e, calls: calls, ids: make([]string, len(calls)), fps: make([]string, len(calls))}
	if e.cfg.disabled {
		return b
	}
	now := e.cfg.now()
	at := now
	if e.cfg.clockSet {
		at = time.Now()
	}
	budget, ok := e.leaseBudget(ctx)
	if !ok {
		return b // each Do answers that no time is left
	}
	var recs []storage.Record
	for i := range calls {
		c := &calls[i]
		if c.Key == "" || checkKey(c.Key) != nil {
			continue
		}
		var fp string
		if c.Payload != nil {
			var err error
			if fp, err = fingerprint(c.Payload); err != nil {
				continue // Do rejects it
			}
		}
		id := recordID(e.cfg.prefix, c.Scope, c.Key)
		b.ids[i], b.fps[i] = id, fp
		if b.claims[id] != nil {
			continue
		}
		if e.cache != nil {
			if rec, ok := e.cache.Get(id); ok && !rec.Expired(now) {
				continue // Do replays it from the cache
			}
		}
		if b.claims == nil {
			b.claims = make(map[string]*waveClaim)
		}
		rec := e.newRecord(id, fp, now, budget)
		b.claims[id] = &waveClaim{rec: rec, at: at, budget: budget}
		recs = append(recs, rec)
	}
	for i, out := range e.claimMany(ctx, recs, now) {
		c := b.claims[recs[i].ID]
		c.res, c.err = out.Result, out.Err
		c.again = out.Err != nil && !errors.Is(out.Err, ErrCorruptRecord)
	}
	return b
}

// claimMany claims recs in one wave: one ClaimMany on a store that can, else
// concurrent single claims. A failure of the whole call is every record's.
func (e *Engine) claimMany(ctx context.Context, recs []storage.Record, now time.Time) []storage.ClaimOutcome {
	if len(recs) == 0 {
		return nil
	}
	if many, ok := e.store.(storage.ClaimManyStore); ok {
		out, err := many.ClaimMany(ctx, recs, now)
		if err == nil && len(out) == len(recs) {
			return out
		}
		if err == nil {
			err = fmt.Errorf("ClaimMany returned %d outcomes for %d records", len(out), len(recs))
		}
		out = make([]storage.ClaimOutcome, len(recs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	out := make([]storage.ClaimOutcome, len(recs))
	concurrently(len(recs), func(i int) {
		out[i].Result, out[i].Err = e.store.Claim(ctx, recs[i], now)
	})
	return out
}

// concurrently runs f(0) … f(n-1), at most waveConcurrency at a time, and
// returns when all have.
func concurrently(n int, f func(i int)) {
	workers := min(n, waveConcurrency)
	next := make(chan int)
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// Do runs call i of the Batch (calls[i] of [Engine.ClaimBatch]) with work,
// and answers it exactly as [Engine.Do] would: the same Result and errors,
// the same outcome reported. The first call of a record runs under the
// wave's claim; a later call of the same record (a duplicate in the batch)
// waits until the first is answered and its completion landed, and is then
// answered from the record, as a duplicate is by Engine.Do.
//
// When work succeeds and the store does not commit a transaction of the
// work's, Do returns before the record's completion lands; the outcome is
// reported once it does, and [Batch.Close] waits for it. As with Engine.Do,
// the caller's answer does not depend on the completion: a failed one is
// logged and reported, and the work counts as done.
func (b *Batch) Do(ctx context.Context, i int, work func(context.Context) ([]byte, error)) (Result, error) {
	call := &b.calls[i]
	if c := b.claims[b.ids[i]]; c != nil {
		b.mu.Lock()
		first := !c.taken
		if first && c.rec.Fingerprint == b.fps[i] {
			c.taken, c.settled = true, make(chan struct{})
			b.mu.Unlock()
			return b.run(ctx, c, call, work)
		}
		settled := c.settled
		b.mu.Unlock()
		if settled != nil {
			select {
			case <-settled:
			case <-ctx.Done(): // Do answers that it is in progress
			}
		}
	}
	res, err := b.e.do(ctx, call, nil, funcs{work: work, acceptFn: call.Accept})
	return Result{Response: res.response, Ran: res.ran, Replay: res.replay}, err
}

// run runs call under the wave's claim c.
func (b *Batch) run(ctx context.Context, c *waveClaim, call *Call, work func(context.Context) ([]byte, error)) (Result, error) {
	e := b.e
	j := &job{id: c.rec.ID, fp: c.rec.Fingerprint, start: e.cfg.now(), batch: b}
	j.fn = funcs{work: work, acceptFn: call.Accept}
	j.r, j.f = &j.fn, &j.own // no flight of the Engine's: the wave holds the claim
	j.pre = c
	if (c.res.Claimed || c.again) && b.stale(ctx, c) {
		// Its lease ends too soon now (a maximum lease shorter than the
		// batch takes): give it back and claim afresh, for a fresh lease.
		// (A claim as its owner would not renew the lease: a store may
		// keep the live record it finds.)
		_ = e.releaseRecord(ctx, c.rec) // ErrLeaseLost: the fresh claim finds the new owner
		j.pre = nil
	}
	defer func() {
		b.mu.Lock()
		if j.pre != nil {
			c.taken = false // not used (no time left to run): Close gives it back
		}
		if !j.queued { // else the completion closes it when it lands
			close(c.settled)
		}
		b.mu.Unlock()
	}()
	if e.tracing() {
		ctx = e.startCall(ctx, call)
	}
	ctx = withLogAttrs(ctx, call.Attrs)
	res, err := e.claimAndRun(ctx, j)
	return Result{Response: res.response, Ran: res.ran, Replay: res.replay}, err
}

// stale reports whether the wave's claim c leaves the work much less time
// than a claim now would.
func (b *Batch) stale(ctx context.Context, c *waveClaim) bool {
	fresh, ok := b.e.leaseBudget(ctx)
	if !ok {
		return false
	}
	left := time.Until(c.at.Add(c.budget - reserve(c.budget)))
	return left < fresh/2
}

// complete queues the completion of a run that succeeded, for a goroutine
// of the Batch to write. On a storage.FinishManyStore one goroutine writes
// them, each round all that queued while the previous round was in flight,
// in one call (one round trip on Redis and PostgreSQL). On another store,
// where many completions cost as many calls anyway (DynamoDB has no
// conditional batch write), each goes out at once, up to waveConcurrency in
// flight: completions that land together (lanes side by side) do not wait
// for each other's round trips.
func (b *Batch) complete(ctx context.Context, j *job, done storage.Record, ev Event, data []byte, start time.Time) {
	j.queued = true
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, completion{ctx: ctx, j: j, done: done, ev: ev, data: data, start: start})
	b.inflight.Add(1)
	writers := waveConcurrency
	if _, ok := b.e.store.(storage.FinishManyStore); ok {
		writers = 1
	}
	if b.writers < writers {
		b.writers++
		go b.drain(writers == 1)
	}
}

// drain writes queued completions until none is left: all that queued in
// one call when grouped, else one at a time.
func (b *Batch) drain(grouped bool) {
	for {
		b.mu.Lock()
		n := min(len(b.queue), 1)
		if grouped {
			n = len(b.queue)
		}
		group := b.queue[:n:n]
		b.queue = b.queue[n:]
		if len(group) == 0 {
			b.writers--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		errs := b.e.completeMany(group)
		for k := range group {
			b.landed(&group[k], errs[k])
		}
	}
}

// landed settles one completion whose write returned cerr: as a run that
// completed by itself does (Engine.completed), and then lets a duplicate
// waiting for it go.
func (b *Batch) landed(p *completion, cerr error) {
	defer b.inflight.Done()
	defer func() {
		if c := b.claims[p.done.ID]; c != nil {
			b.mu.Lock()
			close(c.settled)
			b.mu.Unlock()
		}
	}()
	defer func() {
		// An outcome hook's panic must not take the process down from this
		// goroutine: the work ran and its caller has its answer.
		if v := recover(); v != nil {
			b.e.logger().LogAttrs(p.ctx, slog.LevelError, "idempotent: panic while reporting a batch call's outcome",
				logAttrs(p.ctx, []slog.Attr{slog.String("record_id", p.done.ID), slog.Any("panic", v), slog.String("stack", string(debug.Stack()))})...)
		}
	}()
	if b.e.tracing() {
		b.e.progress(p.ctx, Progress{Stage: StageCommit, Err: cerr})
	}
	_, _ = b.e.completed(p.ctx, p.j, p.done, nil, nil, p.ev, p.data, cerr, result{}, nil, false)
}

// completeMany writes the completions of group: one CompleteMany on a
// store that can, else concurrent single completions. errs[k] is group[k]'s,
// as completeRecord returns it.
func (e *Engine) completeMany(group []completion) []error {
	errs := make([]error, len(group))
	many, ok := e.store.(storage.FinishManyStore)
	if len(group) == 1 || !ok {
		concurrently(len(group), func(k int) {
			errs[k] = e.completeRecord(group[k].ctx, group[k].done, group[k].start, nil)
		})
		return errs
	}
	recs := make([]storage.Record, len(group))
	for k := range group {
		recs[k] = group[k].done
	}
	fctx, cancel := finishContextAt(group[0].ctx, time.Now())
	defer cancel()
	out, err := many.CompleteMany(fctx, recs)
	if err == nil && len(out) != len(recs) {
		err = fmt.Errorf("CompleteMany returned %d errors for %d records", len(out), len(recs))
	}
	for k := range errs {
		cerr := err
		if err == nil {
			cerr = out[k]
		}
		if cerr != nil && isUnknownCommit(cerr) {
			cerr = fmt.Errorf("%w: complete: %w", ErrStore, cerr)
		}
		errs[k] = cerr
	}
	return errs
}

// Close waits for the Batch's completions to land, then gives back, in one
// wave, every record the wave claimed that no call ran (a lane that stopped
// at a failure, a batch whose time ran out), so that a redelivery runs them
// at once instead of after their leases: one ReleaseMany on a
// [storage.FinishManyStore], else concurrent single releases; a record that
// holds finished steps keeps them (it is suspended, as after a failed run).
// A give-back that fails is logged, and the record's lease ends it. Call
// Close once, after every Do has returned.
func (b *Batch) Close(ctx context.Context) {
	b.inflight.Wait()
	e := b.e
	var plain, withSteps []storage.Record
	for _, c := range b.claims {
		if c.taken || (!c.res.Claimed && (c.err == nil || errors.Is(c.err, ErrCorruptRecord))) {
			continue
		}
		if len(c.res.Steps) > 0 {
			withSteps = append(withSteps, c.rec)
		} else {
			plain = append(plain, c.rec)
		}
	}
	if len(plain)+len(withSteps) == 0 {
		return
	}
	fctx, cancel := finishContextAt(ctx, time.Now())
	defer cancel()
	errs := e.releaseMany(fctx, plain)
	for _, rec := range withSteps {
		// Suspended, as giveBack does after a failed run: the steps stay.
		steps := stepLog{e: e, id: rec.ID, lease: rec.Lease, resumed: b.claims[rec.ID].res.Steps}
		plain = append(plain, rec)
		errs = append(errs, e.giveBack(fctx, rec, &steps))
	}
	for i, err := range errs {
		if err != nil {
			e.logger().LogAttrs(ctx, slog.LevelWarn, "idempotent: could not give back a batch's claim that did not run; its lease ends it",
				slog.String("record_id", plain[i].ID), slog.String("error", err.Error()))
		}
	}
}

// releaseMany releases recs in one wave: one ReleaseMany on a store that
// can, else concurrent single releases.
func (e *Engine) releaseMany(ctx context.Context, recs []storage.Record) []error {
	errs := make([]error, len(recs))
	if len(recs) == 0 {
		return errs
	}
	if many, ok := e.store.(storage.FinishManyStore); ok && len(recs) > 1 {
		out, err := many.ReleaseMany(ctx, recs)
		if err == nil && len(out) != len(recs) {
			err = fmt.Errorf("ReleaseMany returned %d errors for %d records", len(out), len(recs))
		}
		for i := range errs {
			if err != nil {
				errs[i] = err
			} else {
				errs[i] = out[i]
			}
		}
		return errs
	}
	concurrently(len(recs), func(i int) {
		errs[i] = e.store.Release(ctx, recs[i].ID, recs[i].Lease)
	})
	return errs
}
