package idempotent

import (
	"context"
	"time"
)

// WithSleep replaces the sleep between the polls of WithWaitInProgress, so
// tests of the wait never sleep.
func WithSleep(sleep func(context.Context, time.Duration) error) Option {
	return func(c *config) { c.sleep = sleep }
}

// WithFollowHook calls hook each time a call starts to wait on the flight of
// another call for its record in this process (coalescing), so tests know
// when every duplicate is waiting.
func WithFollowHook(hook func()) Option {
	return func(c *config) { c.onFollow = hook }
}
