package sqsbatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// sampleOrder is the body of the orders sample events.
type sampleOrder struct {
	OrderID  string `json:"orderId"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

func (o sampleOrder) Validate() error {
	if o.Quantity < 1 {
		return errors.New("quantity must be positive")
	}
	return nil
}

// TestSampleEvents runs the repository's sample batches, in the shape Lambda
// delivers them, through Wrap: the story their README tells.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	first, err := samples.SQS(samples.OrdersBatch)
	require.NoError(t, err)
	again, err := samples.SQS(samples.OrdersRedelivery)
	require.NoError(t, err)

	reserved := map[string]int{}
	var calls []string
	var mu sync.Mutex // a standard queue's messages run side by side
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), func(_ context.Context, o sampleOrder) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, o.OrderID)
		reserved[o.SKU] += o.Quantity
		return nil
	}, sqsbatch.WithKey(func(o sampleOrder) (string, error) { return o.OrderID, nil }))

	poison := []string{"3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34", first.Records[4].MessageId}
	resp, err := h(context.Background(), first)
	require.NoError(t, err)
	assert.Equal(t, poison, failedIDs(resp))
	assert.ElementsMatch(t, []string{"order-1001", "order-1002"}, calls)

	resp, err = h(context.Background(), again)
	require.NoError(t, err)
	assert.Equal(t, poison, failedIDs(resp))
	assert.ElementsMatch(t, []string{"order-1001", "order-1002", "order-1005"}, calls)
	assert.Equal(t, map[string]int{"SKU-RED-MUG": 3, "SKU-BLUE-CAP": 1}, reserved)
}
