package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	samples "github.com/idemkit/idemkit/events"
	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
)

// TestMemory runs the suite in process on the memory store and in-memory
// tables whose writes take a little while, so that concurrent duplicates
// overlap. It needs nothing but Go.
func TestMemory(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	tables := &e2e.MemoryTables{Delay: 5 * time.Millisecond}
	e2e.Run(t, e2e.Target{
		Payments: e2e.LocalInvoker(payments.New(store, tables, "payments"), e2e.PaymentsTimeout),
		Orders:   e2e.LocalInvoker(orders.New(store, tables, "inventory"), e2e.OrdersTimeout),
		State:    tables,
	})
}

// TestDynamoDBLocal runs the suite in process against DynamoDB Local (or
// LocalStack's DynamoDB): the functions as their main packages build them,
// on tables created for this test. Run it under scripts/with-dynamodb.sh.
func TestDynamoDBLocal(t *testing.T) {
	t.Parallel()
	client := localddb.TestClient(t)
	tables := localddb.TestTables(t, client)
	store := dynamostore.New(client, tables.Idempotency)
	e2e.Run(t, e2e.Target{
		Payments: e2e.LocalInvoker(payments.New(store, client, tables.Payments), e2e.PaymentsTimeout),
		Orders:   e2e.LocalInvoker(orders.New(store, client, tables.Inventory), e2e.OrdersTimeout),
		State:    e2e.DynamoState{Client: client, Tables: tables},
	})
}

// TestCoversEverySample keeps the suite and events/ in step.
func TestCoversEverySample(t *testing.T) {
	t.Parallel()
	assert.ElementsMatch(t, samples.Names(), e2e.Covered)
}
