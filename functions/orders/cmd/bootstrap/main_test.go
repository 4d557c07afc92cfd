package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/internal/lambdatest"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

func TestMain(m *testing.M) {
	lambdatest.RunMainIfChild(main)
	os.Exit(m.Run())
}

// TestFailsFast: without its tables the function stops at start-up with one
// JSON log line that names what is missing, before any invocation.
func TestFailsFast(t *testing.T) {
	t.Parallel()
	lambdatest.AssertFailsFast(t, "IDEMPOTENCY_TABLE", "INVENTORY_TABLE")
}

// TestServes runs the built main package behind a fake Lambda Runtime API,
// on DynamoDB Local: the batch and its redelivery, with JSON logs.
func TestServes(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	state := e2e.DynamoState{Client: client, Tables: tables}
	for _, sku := range []string{"SKU-RED-MUG", "SKU-BLUE-CAP"} {
		require.NoError(t, state.Restock(t.Context(), sku, 100), "the function reserves only what is in stock")
	}
	p := lambdatest.Serve(t,
		"AWS_LAMBDA_FUNCTION_NAME=idemkit-orders-test",
		"IDEMPOTENCY_TABLE="+tables.Idempotency,
		"INVENTORY_TABLE="+tables.Inventory)

	for _, name := range []string{samples.OrdersBatch, samples.OrdersRedelivery} {
		event, err := samples.Read(name)
		require.NoError(t, err)
		var resp events.SQSEventResponse
		p.Invoke(t, event, 30*time.Second, &resp)
		assert.Equal(t, []events.SQSBatchItemFailure{
			{ItemIdentifier: "3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34"},
			{ItemIdentifier: "4f8d0a5c-1e6b-4c2d-9f7a-9b0c1d2e3f45"},
		}, resp.BatchItemFailures, name)
	}

	// The logs reach us through a pipe, a moment after the answers.
	require.Eventually(t, func() bool { return strings.Count(p.Output(), `"msg":"orders: reserved"`) == 3 }, 10*time.Second, 10*time.Millisecond,
		"three orders reserved, each once: %s", p.Output())
	lambdatest.AssertJSONLines(t, p.Output())
	assert.Contains(t, p.Output(), `"msg":"sqsbatch: message cannot be processed"`, "poison messages are logged")
}
