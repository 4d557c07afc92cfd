package idempotent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// In-process coalescing (the singleflight idea, for idempotency records).
// Several invocations run in one process at once (Lambda Managed Instances,
// aws-lambda-go's concurrent handlers, an SQS batch with parallelism, any Go
// server), so duplicates of one key often meet in the same process. The first
// call for a record id leads a flight: it goes to the store. The others follow
// it instead of the store:
//
//   - while the leader's claim is in flight, they wait for its answer (one
//     store call for all), and share a response it replays;
//   - while the leader holds the lease, they get ErrInProgress at once, or
//     with WithWaitInProgress its response from memory the moment it is
//     stored; a different payload gets ErrPayloadMismatch;
//   - when the leader's lease has lapsed (it hangs), they go to the store,
//     whatever their payload, where the next one takes the record over (or
//     the store answers), as for a duplicate from another process;
//   - a leader that failed shares nothing (singleflight's known trap is
//     sharing an error): each follower then tries for itself, one at a time.
//
// Nothing here is needed for correctness, which the store's atomic
// operations give; it only saves store calls and answers sooner.

// A flight is the call of this process that leads a record id.
type flight struct {
	mu       sync.Mutex
	changed  chan struct{} // closed at the next change below; made by the first follower to wait
	holds    bool          // the leader holds the lease
	fp       string        // the leader's payload fingerprint, when it holds
	leaseEnd time.Time     // the lease end it holds
	done     bool          // the leader has its answer
	shared   bool          // res is a response followers may share
	res      result        // the leader's stored or replayed response
	resFP    string        // the fingerprint of the record res came from
}

// snapshot is a follower's view of a flight, and the channel that tells it
// of the next change.
type snapshot struct {
	holds, done, shared bool
	fp, resFP           string
	leaseEnd            time.Time
	res                 result
	changed             <-chan struct{}
}

func (f *flight) look() snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{}) // most flights never have a follower
	}
	return snapshot{holds: f.holds, done: f.done, shared: f.shared, fp: f.fp, resFP: f.resFP,
		leaseEnd: f.leaseEnd, res: f.res, changed: f.changed}
}

// notify wakes the followers; f.mu is held.
func (f *flight) notify() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// hold records that the leader claimed rec.
func (f *flight) hold(rec *storage.Record) {
	f.mu.Lock()
	f.holds, f.fp, f.leaseEnd = true, rec.Fingerprint, rec.LeaseExpiresAt
	f.notify()
	f.mu.Unlock()
}

// settle records that the leader's claim was refused: it answers from the
// record (or polls it) without holding the lease.
func (f *flight) settle() {
	f.mu.Lock()
	f.holds = false
	f.notify()
	f.mu.Unlock()
}

// share offers the leader's stored or replayed response to its followers.
func (f *flight) share(r *result, fp string) {
	f.mu.Lock()
	f.shared, f.res, f.resFP = true, *r, fp
	f.notify()
	f.mu.Unlock()
}

// land marks the leader done; a response it did not share is not shared.
func (f *flight) land() {
	f.mu.Lock()
	f.done = true
	f.notify()
	f.mu.Unlock()
}

// coalesce answers a call through the flight of its record id: it leads a
// new one, or follows the one in the air.
func (e *Engine) coalesce(ctx context.Context, j *job) (result, error) {
	for {
		e.mu.Lock()
		f := e.flights[j.id]
		if f == nil {
			j.f = &j.own // a field of the job: no allocation of its own
			if e.flights == nil {
				e.flights = make(map[string]*flight)
			}
			e.flights[j.id] = j.f
			e.mu.Unlock()
			return e.lead(ctx, j)
		}
		e.mu.Unlock()
		if res, answered, err := e.follow(ctx, j, f); answered {
			return res, err
		}
		// The flight had nothing for this call: try again, as the leader
		// of a new flight once this one is gone.
		j.followed = true
		e.retire(j.id, f)
	}
}

// follow waits on f until it can answer the call (answered) or the call must
// go to the store itself.
func (e *Engine) follow(ctx context.Context, j *job, f *flight) (res result, answered bool, err error) {
	var waitOver <-chan time.Time // the end of WithWaitInProgress, once started
	waited := false
	for {
		s := f.look()
		switch {
		case s.done:
			if s.shared && (j.fp == "" || j.fp == s.resFP) {
				res, err = e.share(ctx, j, &s.res)
				return res, true, err
			}
			return result{}, false, nil
		case s.holds && s.leaseEnd.UnixMilli() < e.cfg.now().UnixMilli():
			// The leader overran its lease (it hangs, or the clock moved):
			// go to the store, where the claim takes the record over.
			return result{}, false, nil
		case s.holds && j.fp != "" && j.fp != s.fp:
			return result{}, true, e.finish(ctx, j.start, Event{Outcome: OutcomePayloadMismatch, RecordID: j.id, Err: ErrPayloadMismatch})
		case s.holds && (e.cfg.waitMax <= 0 || waited):
			return result{}, true, e.finish(ctx, j.start, Event{Outcome: OutcomeInProgress, RecordID: j.id, Err: ErrInProgress})
		}
		if waitOver == nil && e.cfg.waitMax > 0 {
			t := time.NewTimer(e.cfg.waitMax)
			defer t.Stop()
			waitOver = t.C
			if e.cfg.onFollow != nil {
				e.cfg.onFollow()
			}
		}
		select {
		case <-s.changed:
		case <-waitOver:
			waited = true // answer from what the flight says now
		case <-ctx.Done():
			return result{}, true, e.finish(ctx, j.start, Event{Outcome: OutcomeInProgress, RecordID: j.id, Err: fmt.Errorf("%w: %w", ErrInProgress, ctx.Err())})
		}
	}
}

// retire removes f from the flights, if it is still there, so the next call
// for id leads a new one.
func (e *Engine) retire(id string, f *flight) {
	e.mu.Lock()
	if e.flights[id] == f {
		delete(e.flights, id)
	}
	e.mu.Unlock()
}

// lead makes the store calls for a flight, then lets its followers go.
func (e *Engine) lead(ctx context.Context, j *job) (result, error) {
	defer func() {
		// Also on a panic (re-raised by run) or runtime.Goexit: followers
		// must never wait for a leader that is gone.
		e.retire(j.id, j.f)
		j.f.land()
	}()
	return e.claimAndRun(ctx, j)
}

// share answers a follower with the response its flight's leader stored or
// replayed.
func (e *Engine) share(ctx context.Context, j *job, r *result) (result, error) {
	ev := Event{Outcome: OutcomeReplayed, RecordID: j.id, Shared: true}
	if err := j.r.accept(r.response); err != nil {
		ev.Outcome, ev.Err = OutcomeRejected, fmt.Errorf("%w: decode response: %w", ErrCorruptRecord, err)
		return result{}, e.finish(ctx, j.start, ev)
	}
	e.finish(ctx, j.start, ev)
	return result{response: r.response, replay: Replay{RecordID: j.id, ExpiresAt: r.replay.ExpiresAt}}, nil
}
