package reliability_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// TestClockSkew runs two invocations of one key over one DynamoDB store
// whose clocks disagree, with the default clock-skew margin
// ((2 * time.Second), 2 s). The owner claims with a 10 s lease
// budget (WithMaxLease), so its handler's context ends at 9 s (a 1 s reserve
// to complete) and the stored lease ends at 10 s + 2 s by the owner's clock.
// The second invocation comes "elapsed" after the claim by real time (it is
// simulated by moving its clock: nothing sleeps), with its clock off by
// "taker"; the owner's clock is off by "owner".
//
// The taker takes over when taker - owner + elapsed > budget + margin. While
// the owner's handler runs (elapsed < budget - reserve), that never happens
// as long as the taker's clock is at most margin + reserve (3 s) ahead of the
// owner's; a taker that is 2 s ahead never takes over a live owner. A taker
// further ahead can take over up to (skew - margin - reserve) before the
// owner's handler ends, and the two then run side by side (the owner's
// completion is still fenced). A taker that is behind takes over late, by
// its lag.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := dynamostore.New(e.client, e.tables.Idempotency)
	const (
		budget  = 10 * time.Second
		reserve = time.Second // the core's reserve, min(1 s, budget/4), as the budget is above 4 s
		margin  = (2 * time.Second)
	)
	handlerEnd := budget - reserve
	tests := []struct {
		name           string
		owner, taker   time.Duration // clock errors
		elapsed        time.Duration
		wantTakeover   bool
		ownerStillLive bool // documents the case: the owner's handler is still running
	}{
		{"taker 2s ahead, owner's handler at its end", 0, 2 * time.Second, handlerEnd, false, true},
		{"taker 2.9s ahead, owner's handler at its end", 0, 2900 * time.Millisecond, handlerEnd, false, true},
		{"taker 2s ahead, after the owner's budget", 0, 2 * time.Second, budget + 100*time.Millisecond, true, false},
		{"owner 2s behind, owner's handler at its end", -2 * time.Second, 0, handlerEnd, false, true},
		{"owner 2s behind, after the owner's budget", -2 * time.Second, 0, budget + 100*time.Millisecond, true, false},
		{"taker 2s behind, lease plus margin lapsed by the owner's clock", 0, -2 * time.Second, budget + margin + 100*time.Millisecond, false, false},
		{"taker 2s behind, 2s later", 0, -2 * time.Second, budget + margin + 2*time.Second + 100*time.Millisecond, true, false},
		{"owner 2s ahead, lease plus margin lapsed by real time", 2 * time.Second, 0, budget + margin + 100*time.Millisecond, false, false},
		{"owner 2s ahead, 2s later", 2 * time.Second, 0, budget + margin + 2*time.Second + 100*time.Millisecond, true, false},
		// Beyond the tolerance: a taker 3.5 s ahead takes over 0.5 s before the
		// owner's handler ends.
		{"beyond tolerance: taker 3.5s ahead, 0.6s before the owner's handler ends", 0, 3500 * time.Millisecond, handlerEnd - 600*time.Millisecond, false, true},
		{"beyond tolerance: taker 3.5s ahead, 0.4s before the owner's handler ends", 0, 3500 * time.Millisecond, handlerEnd - 400*time.Millisecond, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ownerRuns, takerRuns atomic.Int32
			entered, release := make(chan struct{}), make(chan struct{})
			var ownerSeen, takerSeen outcomes
			// The owner's last clock reading before its handler starts is
			// the claim's; the taker's clock counts from it, in real time.
			var lastReading atomic.Int64
			ownerEngine := idempotent.New(store, idempotent.WithMaxLease(budget), ownerSeen.hook(),
				idempotent.WithClock(func() time.Time {
					now := time.Now()
					lastReading.Store(now.UnixNano())
					return now.Add(tt.owner)
				}))
			owner := idempotent.Wrap(ownerEngine, func(ctx context.Context, c charge) (receipt, error) {
				ownerRuns.Add(1)
				close(entered)
				<-release
				return receipt{ChargeID: c.ID, Run: 1}, nil
			}, idempotent.WithKey(byID))
			var claimed time.Time
			takerEngine := idempotent.New(store, idempotent.WithMaxLease(budget), takerSeen.hook(),
				idempotent.WithClock(func() time.Time { return claimed.Add(tt.elapsed + tt.taker) }))
			taker := idempotent.Wrap(takerEngine, func(context.Context, charge) (receipt, error) {
				takerRuns.Add(1)
				return receipt{Run: 2}, nil
			}, idempotent.WithKey(byID))

			in := charge{ID: newKey(t)}
			ownerDone := make(chan error, 1)
			go func() {
				_, err := owner(ctxTimeout(t, 30*time.Second), in)
				ownerDone <- err
			}()
			<-entered
			claimed = time.Unix(0, lastReading.Load())

			_, err := taker(ctxTimeout(t, 30*time.Second), in)
			if tt.wantTakeover {
				require.NoError(t, err)
				assert.Equal(t, int32(1), takerRuns.Load(), "took over")
				assert.True(t, takerSeen.last(t).TookOver)
				if tt.ownerStillLive {
					t.Logf("early takeover: the owner's handler still had %v to run", handlerEnd-tt.elapsed)
				}
			} else {
				require.ErrorIs(t, err, idempotent.ErrInProgress, "the owner keeps its lease")
				assert.Zero(t, takerRuns.Load())
			}
			close(release)
			require.NoError(t, <-ownerDone)
			want := idempotent.OutcomeExecuted
			if tt.wantTakeover {
				want = idempotent.OutcomeLeaseLost
			}
			assert.Equal(t, want, ownerSeen.last(t).Outcome)
		})
	}
	t.Run("stored lease", func(t *testing.T) {
		t.Parallel()
		var seen outcomes
		var before time.Time
		wrapped := idempotent.Wrap(idempotent.New(store, idempotent.WithMaxLease(budget), seen.hook()), func(ctx context.Context, c charge) (receipt, error) {
			after := time.Now()
			inv, _ := idempotent.FromContext(ctx)
			leaseEnd := parseMillis(t, num(e.record(t, inv.RecordID), "in_progress_expiration"))
			deadline, ok := ctx.Deadline()
			require.True(t, ok)
			between(t, "lease = budget + margin", leaseEnd, before.Add(budget+margin-time.Millisecond), after.Add(budget+margin))
			between(t, "handler deadline = budget - reserve", deadline, before.Add(handlerEnd), after.Add(handlerEnd))
			return receipt{}, nil
		}, idempotent.WithKey(byID))
		before = time.Now()
		_, err := wrapped(ctxTimeout(t, 30*time.Second), charge{ID: newKey(t)})
		require.NoError(t, err)
		assert.Equal(t, idempotent.OutcomeExecuted, seen.last(t).Outcome, fmt.Sprint(seen.all()))
	})
}

// between checks that lo <= v <= hi.
func between(t *testing.T, what string, v, lo, hi time.Time) {
	t.Helper()
	assert.False(t, v.Before(lo) || v.After(hi), "%s: %v not within [%v, %v]", what, v, lo, hi)
}
