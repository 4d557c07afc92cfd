package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	lambdatest.AssertFailsFast(t, "IDEMPOTENCY_TABLE", "PAYMENTS_TABLE")
}

// TestServes runs the built main package behind a fake Lambda Runtime API,
// on DynamoDB Local: the function starts, answers, replays, and logs JSON.
func TestServes(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	p := lambdatest.Serve(t,
		"AWS_LAMBDA_FUNCTION_NAME=idemkit-payments-test",
		"AWS_LAMBDA_LOG_LEVEL=DEBUG",
		"IDEMPOTENCY_TABLE="+tables.Idempotency,
		"PAYMENTS_TABLE="+tables.Payments)

	event, err := samples.Read(samples.PaymentNew)
	require.NoError(t, err)
	var bodies []string
	for i := range 2 {
		var resp events.APIGatewayV2HTTPResponse
		p.Invoke(t, event, 10*time.Second, &resp)
		require.Equal(t, 201, resp.StatusCode, resp.Body)
		assert.Equal(t, i == 1, resp.Headers["Idempotent-Replayed"] == "true")
		bodies = append(bodies, resp.Body)
	}
	assert.Equal(t, bodies[0], bodies[1])

	// The logs reach us through a pipe, a moment after the answers.
	require.Eventually(t, func() bool { return strings.Contains(p.Output(), `"outcome":"replayed"`) }, 10*time.Second, 10*time.Millisecond,
		"the core's debug lines are logged at AWS_LAMBDA_LOG_LEVEL=DEBUG: %s", p.Output())
	out := strings.TrimSpace(p.Output())
	lambdatest.AssertJSONLines(t, out)
	assert.Contains(t, out, `"msg":"payments: captured"`)
}
