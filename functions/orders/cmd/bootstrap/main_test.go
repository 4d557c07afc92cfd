package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	samples "github.com/idemkit/idemkit/events"
	"github.com/idemkit/idemkit/functions/internal/lambdatest"
	"github.com/idemkit/idemkit/internal/localddb"
)

func TestMain(m *testing.M) {
	lambdatest.RunMainIfChild(main)
	os.Exit(m.Run())
}

// TestFailsFast: without its tables the function stops at start-up with one
// JSON log line that names what is missing, before any invocation.
func TestFailsFast(t *testing.T) {
	t.Parallel()
	p := lambdatest.Start(t, "IDEMPOTENCY_TABLE=", "INVENTORY_TABLE=", "AWS_LAMBDA_RUNTIME_API=127.0.0.1:9")
	code, err := p.Wait(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, code)
	var line struct{ Level, Msg string }
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(p.Output())), &line), "one JSON line: %s", p.Output())
	assert.Equal(t, "ERROR", line.Level)
	assert.Contains(t, line.Msg, "IDEMPOTENCY_TABLE, INVENTORY_TABLE")
}

// TestServes runs the built main package behind a fake Lambda Runtime API,
// on DynamoDB Local: the batch and its redelivery, with JSON logs.
func TestServes(t *testing.T) {
	t.Parallel()
	client := localddb.TestClient(t)
	tables := localddb.TestTables(t, client)
	api := lambdatest.NewRuntimeAPI(t)
	p := lambdatest.Start(t,
		"AWS_LAMBDA_RUNTIME_API="+api.Address(),
		"AWS_LAMBDA_FUNCTION_NAME=idemkit-orders-test",
		"IDEMPOTENCY_TABLE="+tables.Idempotency,
		"INVENTORY_TABLE="+tables.Inventory)

	for _, name := range []string{samples.OrdersBatch, samples.OrdersRedelivery} {
		event, err := samples.Read(name)
		require.NoError(t, err)
		res, err := api.Invoke(t.Context(), event, 30*time.Second)
		require.NoError(t, err, "output: %s", p.Output())
		require.False(t, res.Failed, "%s", res.Body)
		var resp events.SQSEventResponse
		require.NoError(t, json.Unmarshal(res.Body, &resp))
		assert.Equal(t, []events.SQSBatchItemFailure{
			{ItemIdentifier: "3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34"},
			{ItemIdentifier: "4f8d0a5c-1e6b-4c2d-9f7a-9b0c1d2e3f45"},
		}, resp.BatchItemFailures, name)
	}

	// The logs reach us through a pipe, a moment after the answers.
	require.Eventually(t, func() bool { return strings.Count(p.Output(), `"msg":"orders: reserved"`) == 3 }, 10*time.Second, 10*time.Millisecond,
		"three orders reserved, each once: %s", p.Output())
	for _, line := range strings.Split(strings.TrimSpace(p.Output()), "\n") {
		assert.True(t, json.Valid([]byte(line)), "a JSON log line: %s", line)
	}
	assert.Contains(t, p.Output(), `"msg":"sqsbatch: message cannot be processed"`, "poison messages are logged")
}
