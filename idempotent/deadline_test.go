package idempotent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withLazyDeadline must behave as context.WithDeadline wherever it is
// observed: Err, Done, Deadline, Value and contexts derived from it.
func TestLazyDeadlineActsAsWithDeadline(t *testing.T) {
	type key struct{}
	far := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Second)

	tests := []struct {
		name string
		// make returns the parent, the deadline asked for, and what ends
		// the context after it is made (nil: nothing).
		make    func() (context.Context, time.Time, func())
		wantErr error // after end (or at once when end is nil)
	}{
		{name: "deadline passed", make: func() (context.Context, time.Time, func()) {
			return context.Background(), past, nil
		}, wantErr: context.DeadlineExceeded},
		{name: "deadline passed, no monotonic reading", make: func() (context.Context, time.Time, func()) {
			return context.Background(), past.Round(0), nil
		}, wantErr: context.DeadlineExceeded},
		{name: "parent cancelled later", make: func() (context.Context, time.Time, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, far, cancel
		}, wantErr: context.Canceled},
		{name: "parent already done", make: func() (context.Context, time.Time, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, far, nil
		}, wantErr: context.Canceled},
		{name: "parent's deadline earlier", make: func() (context.Context, time.Time, func()) {
			ctx, cancel := context.WithDeadline(context.Background(), past)
			t.Cleanup(cancel)
			return ctx, far, nil
		}, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		for _, doneFirst := range []bool{false, true} {
			name := tt.name + "/err first"
			if doneFirst {
				name = tt.name + "/done first"
			}
			t.Run(name, func(t *testing.T) {
				parent, deadline, end := tt.make()
				parent = context.WithValue(parent, key{}, "v")
				ctx := withLazyDeadline(parent, deadline)
				defer ctx.cancel()
				assert.Equal(t, "v", ctx.Value(key{}))
				var done <-chan struct{}
				if doneFirst {
					done = ctx.Done()
				}
				if end != nil {
					require.NoError(t, ctx.Err(), "the context ended before its parent")
					end()
				}
				if done == nil {
					require.ErrorIs(t, ctx.Err(), tt.wantErr)
					done = ctx.Done()
				}
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("Done was not closed")
				}
				require.ErrorIs(t, ctx.Err(), tt.wantErr)
			})
		}
	}
}

func TestLazyDeadlineEndsAtItsDeadline(t *testing.T) {
	deadline := time.Now().Add(20 * time.Millisecond)
	ctx := withLazyDeadline(context.Background(), deadline)
	defer ctx.cancel()
	got, ok := ctx.Deadline()
	require.True(t, ok)
	assert.Equal(t, deadline, got)

	child, stop := context.WithCancel(ctx) // derived contexts see the end too
	defer stop()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from it did not end at the deadline")
	}
	assert.False(t, time.Now().Before(deadline), "ended before its deadline")
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, child.Err(), context.DeadlineExceeded)
}

func TestLazyDeadlineCancel(t *testing.T) {
	for _, doneFirst := range []bool{false, true} {
		ctx := withLazyDeadline(context.Background(), time.Now().Add(time.Hour))
		if doneFirst {
			_ = ctx.Done()
		}
		require.NoError(t, ctx.Err())
		ctx.cancel()
		ctx.cancel() // idempotent, as a context.CancelFunc is
		<-ctx.Done()
		assert.True(t, errors.Is(ctx.Err(), context.Canceled), "doneFirst=%v: %v", doneFirst, ctx.Err())
		if doneFirst {
			assert.False(t, ctx.timer.Stop(), "the timer still runs after cancel")
		}
	}
}

func TestLazyDeadlineParentDeadlineIsReported(t *testing.T) {
	early := time.Now().Add(time.Minute)
	parent, cancel := context.WithDeadline(context.Background(), early)
	defer cancel()
	ctx := withLazyDeadline(parent, early.Add(time.Hour))
	defer ctx.cancel()
	got, _ := ctx.Deadline()
	assert.Equal(t, early, got)
}
