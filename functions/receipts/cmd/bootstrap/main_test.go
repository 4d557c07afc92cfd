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

// TestFailsFast: without its table the function stops at start-up with one
// JSON log line that names what is missing, before any invocation.
func TestFailsFast(t *testing.T) {
	t.Parallel()
	lambdatest.AssertFailsFast(t, "IDEMPOTENCY_TABLE")
}

// TestServes runs the built main package behind a fake Lambda Runtime API,
// on DynamoDB Local: the sample stream batch and its redelivery send three
// receipts, each once, with JSON logs.
func TestServes(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	p := lambdatest.Serve(t,
		"AWS_LAMBDA_FUNCTION_NAME=idemkit-receipts-test",
		"IDEMPOTENCY_TABLE="+tables.Idempotency)

	event, err := samples.Read(samples.DDBStreamsPayments)
	require.NoError(t, err)
	for range 2 {
		var resp events.DynamoDBEventResponse
		p.Invoke(t, event, 30*time.Second, &resp)
		assert.Empty(t, resp.BatchItemFailures)
	}

	// The logs reach us through a pipe, a moment after the answers.
	require.Eventually(t, func() bool { return strings.Count(p.Output(), `"msg":"receipts: receipt done"`) == 3 }, 10*time.Second, 10*time.Millisecond,
		"three receipts, each once: %s", p.Output())
	lambdatest.AssertJSONLines(t, p.Output())
	assert.Equal(t, 3, strings.Count(p.Output(), `"msg":"receipts: receipt sent"`), "the mailer's lines")
	assert.Contains(t, p.Output(), `"_aws"`, "EMF metrics")
}
