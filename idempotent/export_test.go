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
