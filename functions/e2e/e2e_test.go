package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// TestMemory runs the suite in process on the memory store and in-memory
// tables whose writes take a little while, so that concurrent duplicates
// overlap. It needs nothing but Go.
func TestMemory(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	tables := &e2e.MemoryTables{Delay: 5 * time.Millisecond}
	ordersFn := e2e.LocalInvoker(orders.New(store, tables, "inventory"), e2e.OrdersTimeout)
	e2e.Run(t, e2e.Target{
		Payments: e2e.LocalInvoker(payments.New(store, &payments.LocalProcessor{}, tables, "payments"), e2e.PaymentsTimeout),
		Orders:   ordersFn,
		State:    tables,
		Queue:    localQueue(t, ordersFn),
	})
}

// TestDynamoDBLocal runs the suite in process against DynamoDB Local (or
// LocalStack's DynamoDB): the functions as their main packages build them,
// on tables created for this test. Run it under scripts/with-dynamodb.sh.
func TestDynamoDBLocal(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	store := dynamostore.New(client, tables.Idempotency)
	ordersFn := e2e.LocalInvoker(orders.New(store, client, tables.Inventory), e2e.OrdersTimeout)
	e2e.Run(t, e2e.Target{
		Payments: e2e.LocalInvoker(payments.New(store, &payments.LocalProcessor{}, client, tables.Payments), e2e.PaymentsTimeout),
		Orders:   ordersFn,
		State:    e2e.DynamoState{Client: client, Tables: tables},
		Queue:    localQueue(t, ordersFn),
	})
}

// localQueue is the suite's queue in process, with the stack's
// maxReceiveCount (5) and batches of 4 rather than 10, so that duplicates
// also meet across batches. If the suite sent anything, then once it is
// done the poison and the invalid message, each sent twice, must be the only
// dead letters.
func localQueue(t *testing.T, orders e2e.Invoker) e2e.QueueSender {
	q := &e2e.LocalQueue{Orders: orders, BatchSize: 4, MaxReceives: 5}
	var sent atomic.Bool
	t.Cleanup(func() {
		if !sent.Load() {
			return // the queue scenario did not run (go test -run)
		}
		dead := q.DeadLetters()
		assert.Len(t, dead, 4, "dead letters: %q", dead)
		for _, body := range dead {
			assert.True(t, !json.Valid([]byte(body)) || strings.Contains(body, `"quantity":0`),
				"only the poison and the invalid order are dead letters: %s", body)
		}
	})
	return func(ctx context.Context, bodies []string) error {
		sent.Store(true)
		return q.Send(ctx, bodies)
	}
}

// TestCoversEverySample keeps the suite and events/ in step: every sample is
// sent by the suite, except the stream, Kafka and Amazon MQ batches, which a deployed
// stack receives from its event sources, not from a client: their sources'
// tests and the receipts function's drive them (named here, so a new sample
// must be placed).
func TestCoversEverySample(t *testing.T) {
	t.Parallel()
	elsewhere := map[string]string{
		"kinesis-batch.json":       "idempotent/kinesisbatch",
		"ddbstreams-payments.json": "idempotent/ddbstreams, functions/receipts",
		"kafka-batch.json":         "idempotent/kafkabatch",
		"rabbitmq.json":            "idempotent/rabbitmqbatch",
		"activemq.json":            "idempotent/activemqbatch",
	}
	names, err := samples.Names()
	require.NoError(t, err)
	var sent []string
	for _, n := range names {
		if _, ok := elsewhere[n]; !ok {
			sent = append(sent, n)
		}
	}
	assert.ElementsMatch(t, sent, e2e.Covered)
	for n := range elsewhere {
		assert.Contains(t, names, n, "a sample named as driven elsewhere is gone from events/")
	}
}
