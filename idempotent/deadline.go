package idempotent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is context.WithDeadline(parent, deadline) made lazily: its
// channel and timer exist only once something asks for Done. Work that never
// selects on Done (much in-process work, and every completion on the memory
// store, which only checks Err) then costs no timer; with two timers a call,
// they were a third of the engine's own time per first run.
//
// Unlike a context made by the context package, context.Cause of a
// deadlineCtx reports its parent's cause (a context only the context package
// makes can carry its own); Err is exact.
type deadlineCtx struct {
	context.Context
	deadline time.Time // the earlier of the parent's and the one asked for

	ended atomic.Bool // err is set: Err reads it only then, so a live context's Err takes no lock

	mu         sync.Mutex
	done       chan struct{} // made by the first Done
	err        error         // set once, when the context ends
	timer      *time.Timer
	stopParent func() bool
}

// withLazyDeadline is context.WithDeadline without the timer until one is
// needed. Its cancel is the method, not a closure: one allocation less.
func withLazyDeadline(parent context.Context, deadline time.Time) *deadlineCtx {
	c := new(deadlineCtx)
	c.init(parent, deadline)
	return c
}

// init makes the zero c what withLazyDeadline returns, in memory the caller
// chose (to share an allocation).
func (c *deadlineCtx) init(parent context.Context, deadline time.Time) {
	if pd, ok := parent.Deadline(); ok && pd.Before(deadline) {
		deadline = pd
	}
	c.Context, c.deadline = parent, deadline
}

// cancel is the context's context.CancelFunc.
func (c *deadlineCtx) cancel() { c.end(context.Canceled) }

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.err = c.check()
	}
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	if c.Context.Done() != nil {
		c.stopParent = context.AfterFunc(c.Context, func() { c.end(c.Context.Err()) })
	}
	return c.done
}

func (c *deadlineCtx) Err() error {
	if c.ended.Load() {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	}
	if err := c.check(); err != nil {
		return c.end(err)
	}
	return nil
}

// check says whether the context has ended, from its parent and the clock.
func (c *deadlineCtx) check() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	// Until, not Now().Before: the same test, but a deadline with a
	// monotonic reading (all of the engine's) then costs one clock read, not two.
	if time.Until(c.deadline) <= 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// end ends the context with err, unless it has ended already, and returns
// the error it ended with.
func (c *deadlineCtx) end(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.err = err
	c.ended.Store(true)
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopParent != nil {
		c.stopParent()
	}
	return err
}
