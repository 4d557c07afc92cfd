package sqsbatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

// Steps work in a batch: a message whose handler fails after its first step
// is reported, and its redelivery resumes after that step.
func TestStepsResumeOnRedelivery(t *testing.T) {
	t.Parallel()
	var reserved, shipped atomic.Int32
	shipDown := atomic.Bool{}
	shipDown.Store(true)
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), func(ctx context.Context, o order) error {
		if _, err := idempotent.Step(ctx, "reserve", func(context.Context) (int, error) {
			reserved.Add(1)
			return o.Amount, nil
		}); err != nil {
			return err
		}
		_, err := idempotent.Step(ctx, "ship", func(context.Context) (bool, error) {
			if shipDown.Load() {
				return false, errors.New("carrier down")
			}
			shipped.Add(1)
			return true, nil
		})
		return err
	}, sqsbatch.WithKey(byOrderID))

	ev := batch(msg("m1", body("o-1", 3)))
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, failedIDs(resp), "the failed message is reported for redelivery")

	shipDown.Store(false)
	resp, err = h(context.Background(), ev)
	require.NoError(t, err)
	assert.Empty(t, failedIDs(resp))
	assert.Equal(t, int32(1), reserved.Load(), "the finished step ran again on redelivery")
	assert.Equal(t, int32(1), shipped.Load())
}
