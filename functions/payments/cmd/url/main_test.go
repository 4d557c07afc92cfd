package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/internal/lambdatest"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
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

// streamed is a response as lambdaurl streams it to the Runtime API: a JSON
// prelude (status, headers, cookies), eight NUL bytes, then the body.
type streamed struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	body       string
}

func decodeStreamed(t *testing.T, raw []byte) streamed {
	t.Helper()
	prelude, body, ok := bytes.Cut(raw, make([]byte, 8))
	require.True(t, ok, "no prelude separator in %q", raw)
	var s streamed
	require.NoError(t, json.Unmarshal(prelude, &s), "%s", prelude)
	s.body = string(body)
	return s
}

// TestServes runs the built main package behind a fake Lambda Runtime API,
// on DynamoDB Local, with Function URL events: a signed caller's request is
// answered and its retry replayed, and an unsigned one is refused.
func TestServes(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	p := lambdatest.Serve(t,
		"AWS_LAMBDA_FUNCTION_NAME=idemkit-payments-url-test",
		"IDEMPOTENCY_TABLE="+tables.Idempotency,
		"PAYMENTS_TABLE="+tables.Payments)

	event := func(signed bool) []byte {
		ev := events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: payments.Path,
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": "c0ffee00-0000-4000-8000-000000000001"},
			Body:    `{"customerId":"cus_NffrFeUfNV2Hib","amount":2500,"currency":"EUR"}`,
		}
		ev.RequestContext.DomainName = "abc123.lambda-url.us-east-1.on.aws"
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = http.MethodPost, payments.Path
		if signed {
			ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
				IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
					AccountID: "111122223333", CallerID: "AIDAALICE", UserARN: "arn:aws:iam::111122223333:user/alice",
				},
			}
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		return b
	}
	invoke := func(ev []byte) streamed {
		t.Helper()
		res, err := p.API.Invoke(t.Context(), ev, 10*time.Second)
		require.NoError(t, err, "output: %s", p.Output())
		require.False(t, res.Failed, "%s", res.Body)
		return decodeStreamed(t, res.Body)
	}

	first := invoke(event(true))
	require.Equal(t, http.StatusCreated, first.StatusCode, first.body)
	assert.Empty(t, first.Headers[nethttp.HeaderReplayed])
	again := invoke(event(true))
	assert.Equal(t, http.StatusCreated, again.StatusCode)
	assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
	assert.Equal(t, first.body, again.body)

	unsigned := invoke(event(false))
	assert.Equal(t, http.StatusForbidden, unsigned.StatusCode)
	assert.Contains(t, unsigned.body, payments.ProblemUnsigned)

	// The logs reach us through a pipe, a moment after the answers.
	require.Eventually(t, func() bool { return strings.Contains(p.Output(), `"_aws"`) }, 10*time.Second, 10*time.Millisecond,
		"EMF metric lines: %s", p.Output())
	lambdatest.AssertJSONLines(t, strings.TrimSpace(p.Output()))
}
