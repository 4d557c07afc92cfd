package orders_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/idempotent"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		order orders.Order
		err   string // "" for valid
	}{
		{"valid", orders.Order{OrderID: "o-1", SKU: "SKU-1", Quantity: 1}, ""},
		{"largest quantity", orders.Order{OrderID: "o-1", SKU: "SKU-1", Quantity: orders.MaxQuantity}, ""},
		{"zero quantity", orders.Order{OrderID: "o-1", SKU: "SKU-1"}, "quantity must be an integer from 1 to 1000"},
		{"negative quantity", orders.Order{OrderID: "o-1", SKU: "SKU-1", Quantity: -1}, "quantity must be an integer from 1 to 1000"},
		{"too many", orders.Order{OrderID: "o-1", SKU: "SKU-1", Quantity: orders.MaxQuantity + 1}, "quantity must be an integer from 1 to 1000"},
		{"no order id", orders.Order{SKU: "SKU-1", Quantity: 1}, "orderId is required"},
		{"long sku", orders.Order{OrderID: "o-1", SKU: strings.Repeat("s", orders.MaxIDLength+1), Quantity: 1}, "sku must be at most 128 bytes long"},
		{"control character", orders.Order{OrderID: "o\n1", SKU: "SKU-1", Quantity: 1}, "orderId must not contain control characters"},
		{"everything", orders.Order{}, "orderId is required\nsku is required\nquantity must be an integer from 1 to 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.order.Validate()
			if tt.err == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tt.err)
			}
		})
	}
}

func msg(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:000000000000:orders"}
}

func failures(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func reserved(t *testing.T, tables *e2e.MemoryTables) map[string]int64 {
	t.Helper()
	items, err := tables.Inventory(t.Context())
	require.NoError(t, err)
	out := map[string]int64{}
	for _, it := range items {
		if it.Reserved != 0 {
			out[it.SKU] = it.Reserved
		}
	}
	return out
}

// restock gives each SKU 100 units.
func restock(t *testing.T, tables *e2e.MemoryTables, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		require.NoError(t, tables.Restock(t.Context(), sku, 100))
	}
}

func TestDecoding(t *testing.T) {
	t.Parallel()
	tables := &e2e.MemoryTables{}
	restock(t, tables, "A")
	handler := orders.New(idempotent.NewMemoryStore(), tables, "inventory")
	resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{
		msg("ok", `{"orderId":"o-1","sku":"A","quantity":2,"note":"producers may add fields"}`),
		msg("string quantity", `{"orderId":"o-2","sku":"A","quantity":"2"}`),
		msg("fraction", `{"orderId":"o-3","sku":"A","quantity":2.5}`),
		msg("null", `null`),
		msg("array", `[]`),
		msg("numeric id", `{"orderId":4,"sku":"A","quantity":1}`),
		msg("no id", `{"sku":"A","quantity":1}`),
	}})
	require.NoError(t, err)
	assert.Equal(t, []string{"string quantity", "fraction", "null", "array", "numeric id", "no id"}, failures(resp))
	assert.Equal(t, map[string]int64{"A": 2}, reserved(t, tables))
}

// TestInventoryFailure: a failed reservation fails its message only and
// releases its key, so the redelivery reserves it, once.
func TestInventoryFailure(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	tables := &e2e.MemoryTables{Fail: func(string) error {
		if calls.Add(1) == 1 {
			return errors.New("ThrottlingException")
		}
		return nil
	}}
	restock(t, tables, "A", "B")
	handler := orders.New(idempotent.NewMemoryStore(), tables, "inventory")
	batch := events.SQSEvent{Records: []events.SQSMessage{
		msg("m1", `{"orderId":"o-1","sku":"A","quantity":1}`),
		msg("m2", `{"orderId":"o-2","sku":"B","quantity":3}`),
	}}
	resp, err := handler(t.Context(), batch)
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1)
	failed := resp.BatchItemFailures[0].ItemIdentifier
	before := reserved(t, tables)
	assert.Len(t, before, 1, "the other message was reserved")

	resp, err = handler(t.Context(), batch)
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures, "%s is retried and succeeds", failed)
	assert.Equal(t, map[string]int64{"A": 1, "B": 3}, reserved(t, tables))
}

// TestUnknownWriteOutcomeReservesOnce: a reservation that landed but
// answered an error fails its message and releases its key; the redelivery
// runs the handler again, and its write, carrying the order's token, finds
// the reservation already applied.
func TestUnknownWriteOutcomeReservesOnce(t *testing.T) {
	t.Parallel()
	// The first write lands but answers an error.
	var writes atomic.Int32
	inventory := &e2e.MemoryTables{FailAfter: func(string) error {
		if writes.Add(1) == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}}
	restock(t, inventory, "A")
	handler := orders.New(idempotent.NewMemoryStore(), inventory, "inventory")
	batch := events.SQSEvent{Records: []events.SQSMessage{msg("m1", `{"orderId":"o-1","sku":"A","quantity":2}`)}}

	resp, err := handler(t.Context(), batch)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, failures(resp))
	resp, err = handler(t.Context(), batch) // SQS redelivers m1
	require.NoError(t, err)
	assert.Empty(t, failures(resp))
	assert.Equal(t, map[string]int64{"A": 2}, reserved(t, inventory))
}

func TestSamples(t *testing.T) {
	t.Parallel()
	tables := &e2e.MemoryTables{}
	restock(t, tables, "SKU-RED-MUG", "SKU-BLUE-CAP")
	handler := orders.New(idempotent.NewMemoryStore(), tables, "inventory")
	for _, tt := range []struct {
		name string
		want map[string]int64
	}{
		{samples.OrdersBatch, map[string]int64{"SKU-RED-MUG": 2, "SKU-BLUE-CAP": 1}},
		{samples.OrdersRedelivery, map[string]int64{"SKU-RED-MUG": 3, "SKU-BLUE-CAP": 1}},
	} {
		ev, err := samples.SQS(tt.name)
		require.NoError(t, err)
		resp, err := handler(t.Context(), ev)
		require.NoError(t, err)
		assert.Equal(t, []string{"3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34", "4f8d0a5c-1e6b-4c2d-9f7a-9b0c1d2e3f45"}, failures(resp), tt.name)
		assert.Equal(t, tt.want, reserved(t, tables), tt.name)
	}
}

// TestOutOfStock: an order its SKU's stock does not cover reserves nothing
// and fails its message, every time it is delivered (SQS then moves it to
// the dead-letter queue); an order the stock covers is reserved.
func TestOutOfStock(t *testing.T) {
	t.Parallel()
	tables := &e2e.MemoryTables{}
	require.NoError(t, tables.Restock(t.Context(), "A", 2))
	handler := orders.New(idempotent.NewMemoryStore(), tables, "inventory")
	batch := events.SQSEvent{Records: []events.SQSMessage{
		msg("big", `{"orderId":"o-1","sku":"A","quantity":3}`),
		msg("none", `{"orderId":"o-2","sku":"Z","quantity":1}`),
		msg("fits", `{"orderId":"o-3","sku":"A","quantity":2}`),
	}}
	for range 2 {
		resp, err := handler(t.Context(), batch)
		require.NoError(t, err)
		assert.Equal(t, []string{"big", "none"}, failures(resp))
	}
	items, err := tables.Inventory(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, []orders.InventoryItem{{SKU: "A", Stock: 0, Reserved: 2}}, items)
}

func TestNewPanicsOnMisconfiguration(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	assert.Panics(t, func() { orders.New(store, nil, "inventory") })
	assert.Panics(t, func() { orders.New(store, &e2e.MemoryTables{}, "") })
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := orders.ConfigFromEnv(env(map[string]string{"IDEMPOTENCY_TABLE": "idem", "INVENTORY_TABLE": "inv"}))
	require.NoError(t, err)
	assert.Equal(t, orders.Config{IdempotencyTable: "idem", InventoryTable: "inv"}, cfg)
	_, err = orders.ConfigFromEnv(env(map[string]string{"IDEMPOTENCY_TABLE": "idem"}))
	assert.EqualError(t, err, "boot: missing required environment variable(s): INVENTORY_TABLE")
}

func ExampleNew() {
	// In the function: dynamostore.New(client, table) and the DynamoDB client.
	store, inventory := idempotent.NewMemoryStore(), &e2e.MemoryTables{}
	_ = inventory.Restock(context.Background(), "SKU-RED-MUG", 10)
	handler := orders.New(store, inventory, "inventory")

	order := `{"orderId":"order-1001","sku":"SKU-RED-MUG","quantity":2}`
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: order},
		{MessageId: "m2", Body: order}, // the same order again: a producer retry
		{MessageId: "m3", Body: `{"orderId":`},
	}}
	resp, _ := handler(context.Background(), batch)
	fmt.Println("failed:", resp.BatchItemFailures[0].ItemIdentifier)
	items, _ := inventory.Inventory(context.Background())
	fmt.Println(items[0].SKU, "reserved", items[0].Reserved, "stock", items[0].Stock)
	// Output:
	// failed: m3
	// SKU-RED-MUG reserved 2 stock 8
}
