package orders_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// noInventory fails the test if the function writes the inventory itself:
// over a dynamostore.Store the reservation goes in the completion's
// transaction.
type noInventory struct{ t *testing.T }

func (n noInventory) UpdateItem(_ context.Context, _ *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	n.t.Error("the reservation was written outside the transaction")
	return nil, errors.New("test: no UpdateItem")
}

// TestReservationInTransaction: on DynamoDB the reservation commits with the
// order's completion; an order the stock does not cover commits nothing (no
// stock taken, no record left: it was released) and fails its message on
// every delivery, while the duplicate of a reserved order is replayed.
func TestReservationInTransaction(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	state := e2e.DynamoState{Client: client, Tables: tables}
	require.NoError(t, state.Restock(t.Context(), "SKU-TX", 5))
	handler := orders.New(dynamostore.New(client, tables.Idempotency), noInventory{t}, tables.Inventory)
	batch := events.SQSEvent{Records: []events.SQSMessage{
		msg("m1", `{"orderId":"o-1","sku":"SKU-TX","quantity":3}`),
		msg("m2", `{"orderId":"o-2","sku":"SKU-TX","quantity":3}`),
	}}
	// Parallel orders of one SKU race for its item: run them one at a time.
	for _, m := range batch.Records {
		resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{m}})
		require.NoError(t, err)
		if m.MessageId == "m2" {
			assert.Equal(t, []string{"m2"}, failures(resp), "out of stock")
		} else {
			assert.Empty(t, failures(resp))
		}
	}
	again, err := handler(t.Context(), batch) // redelivered
	require.NoError(t, err)
	assert.Equal(t, []string{"m2"}, failures(again))

	items, err := state.Inventory(t.Context())
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, orders.InventoryItem{SKU: "SKU-TX", Stock: 2, Reserved: 3}, items[0], "reserved once, o-2 took nothing")
	records, err := localddb.Scan[map[string]any](t.Context(), client, tables.Idempotency)
	require.NoError(t, err)
	assert.Len(t, records, 1, "o-1's record; o-2's was released")
}
