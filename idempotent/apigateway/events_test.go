package apigateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/sampleevents"
)

// Tests on raw events, for what the neutral harness cannot express: how each
// payload version carries repeated headers, and events as API Gateway sends
// them (JSON).

func TestHeadersV1(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		single map[string]string
		multi  map[string][]string
		status int
		typ    string
	}{
		{name: "single only", single: map[string]string{"idempotency-key": "k"}, status: http.StatusOK},
		{name: "multi only", multi: map[string][]string{"Idempotency-Key": {"k"}}, status: http.StatusOK},
		{name: "multi wins over single", single: map[string]string{"Idempotency-Key": "other"}, multi: map[string][]string{"IDEMPOTENCY-KEY": {"k"}}, status: http.StatusOK},
		{name: "repeated header", single: map[string]string{"Idempotency-Key": "b"}, multi: map[string][]string{"Idempotency-Key": {"a", "b"}}, status: http.StatusBadRequest, typ: nethttp.ProblemInvalidKey},
		{name: "repeated identical header", multi: map[string][]string{"Idempotency-Key": {"k", "k"}}, status: http.StatusBadRequest, typ: nethttp.ProblemInvalidKey},
		{name: "names differing in case", single: map[string]string{"Idempotency-Key": "a", "idempotency-key": "b"}, status: http.StatusBadRequest, typ: nethttp.ProblemInvalidKey},
		{name: "empty multi list", multi: map[string][]string{"Idempotency-Key": {}}, status: http.StatusBadRequest, typ: nethttp.ProblemMissingKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			h := apigateway.WrapV1(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				runs++
				return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}, nil
			})
			ev := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/p", Headers: tt.single, MultiValueHeaders: tt.multi}
			out, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, tt.status, out.StatusCode)
			if tt.typ != "" {
				assert.Contains(t, out.Body, tt.typ)
				assert.Zero(t, runs)
			}
			if tt.status == http.StatusOK {
				out, err = h(context.Background(), ev)
				require.NoError(t, err)
				assert.Equal(t, "true", out.Headers[nethttp.HeaderReplayed])
				assert.Equal(t, 1, runs)
			}
		})
	}
}

func TestHeadersV2(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		value  string
		status int
	}{
		{"one key", "k", http.StatusOK},
		{"repeated header, joined by API Gateway", "a, b", http.StatusBadRequest},
		{"repeated identical header", "k,k", http.StatusBadRequest},
		{"repeated quoted header", `"a", "b"`, http.StatusBadRequest},
		{"quoted key holding a comma", `"a, b"`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := apigateway.WrapV2(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK}, nil
			})
			ev := events.APIGatewayV2HTTPRequest{RawPath: "/p", Headers: map[string]string{"idempotency-key": tt.value}}
			ev.RequestContext.HTTP.Method = "POST"
			out, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, tt.status, out.StatusCode)
			if tt.status != http.StatusOK {
				assert.Contains(t, out.Body, nethttp.ProblemInvalidKey)
			}
		})
	}
}

// TestEventsFromJSON: events as the Lambda runtime decodes them (authorizer
// claims as map[string]any, numbers as float64), from events/ and
// testdata/, through WrapV1 and WrapV2: Alice's retry is replayed, as it
// first went out; Bob's request with her key and body runs; her key with
// another body is refused.
func TestEventsFromJSON(t *testing.T) {
	t.Parallel()
	t.Run("v1", func(t *testing.T) {
		t.Parallel()
		runs := 0
		h := apigateway.WrapV1(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			runs++
			return events.APIGatewayProxyResponse{StatusCode: http.StatusCreated, Headers: map[string]string{"Content-Type": "application/json"},
				MultiValueHeaders: map[string][]string{"Set-Cookie": {"s=1"}}, Body: `{"order":1}`}, nil
		})
		call := func(edit func(*events.APIGatewayProxyRequest)) events.APIGatewayProxyResponse {
			ev := fixtureV1(t, restPayment)
			edit(&ev)
			out, err := h(t.Context(), ev)
			require.NoError(t, err)
			return out
		}
		first := call(func(*events.APIGatewayProxyRequest) {})
		assert.Equal(t, http.StatusCreated, first.StatusCode)
		assert.Equal(t, []string{"s=1"}, first.MultiValueHeaders["Set-Cookie"])
		again := call(func(ev *events.APIGatewayProxyRequest) {
			ev.Body = `{ "currency":"EUR", "amount":2500, "customerId":"cus_NffrFeUfNV2Hib" }`
			ev.RequestContext.RequestID = "another"
		})
		assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
		assert.Equal(t, "application/json", again.Headers["Content-Type"])
		assert.Equal(t, `{"order":1}`, again.Body)
		assert.NotContains(t, again.MultiValueHeaders, "Set-Cookie")
		bob := call(func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer["claims"].(map[string]any)["sub"] = "9c8d7e6f-5a4b-4c3d-8e2f-1a0b9c8d7e6f"
		})
		assert.Equal(t, http.StatusCreated, bob.StatusCode)
		assert.Empty(t, bob.Headers[nethttp.HeaderReplayed])
		assert.Equal(t, 2, runs)
		other := call(func(ev *events.APIGatewayProxyRequest) {
			ev.Body = `{"customerId":"cus_NffrFeUfNV2Hib","amount":9900,"currency":"EUR"}`
		})
		assert.Equal(t, http.StatusUnprocessableEntity, other.StatusCode)
		assert.Equal(t, 2, runs)
	})
	t.Run("v2", func(t *testing.T) {
		t.Parallel()
		runs := 0
		h := apigateway.WrapV2(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Headers: map[string]string{"content-type": "application/json"}, Cookies: []string{"s=1"}, Body: `{"order":1}`}, nil
		})
		call := func(name string, edit func(*events.APIGatewayV2HTTPRequest)) events.APIGatewayV2HTTPResponse {
			ev := fixtureV2(t, name)
			if edit != nil {
				edit(&ev)
			}
			out, err := h(t.Context(), ev)
			require.NoError(t, err)
			return out
		}
		first := call(sampleevents.PaymentNew, nil)
		assert.Equal(t, []string{"s=1"}, first.Cookies)
		for _, again := range []events.APIGatewayV2HTTPResponse{
			call(sampleevents.PaymentReplay, nil),
			call(sampleevents.PaymentReplay, func(ev *events.APIGatewayV2HTTPRequest) {
				ev.Body = `{ "currency":"EUR", "amount":2500, "customerId":"cus_NffrFeUfNV2Hib" }`
			}),
		} {
			assert.Equal(t, http.StatusCreated, again.StatusCode)
			assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
			assert.Equal(t, "application/json", again.Headers["content-type"], "the header as the handler named it")
			assert.Equal(t, `{"order":1}`, again.Body)
			assert.Empty(t, again.Cookies)
		}
		assert.Equal(t, http.StatusCreated, call(sampleevents.PaymentSecondCaller, nil).StatusCode)
		assert.Equal(t, 2, runs)
		assert.Equal(t, http.StatusUnprocessableEntity, call(sampleevents.PaymentDifferentBody, nil).StatusCode)
		missing := call(sampleevents.PaymentMissingKey, nil)
		assert.Equal(t, http.StatusBadRequest, missing.StatusCode)
		assert.Contains(t, missing.Body, nethttp.ProblemMissingKey)
		malformed := call(sampleevents.PaymentMalformedJSON, nil)
		assert.Equal(t, http.StatusBadRequest, malformed.StatusCode)
		assert.Contains(t, malformed.Body, nethttp.ProblemInvalidJSON)
		assert.Equal(t, 2, runs)
	})
}

// TestEventWithoutMethod: an event with no HTTP method is not an API Gateway
// proxy request of the wrapper's payload version (a 2.0 event given to
// WrapV1, say); whether it needs a key cannot be told, so it is refused as
// malformed, never run without idempotency. The outcome hook sees the
// refusal.
func TestEventWithoutMethod(t *testing.T) {
	t.Parallel()
	const v1JSON = `{"httpMethod":"POST","path":"/orders","headers":{"Idempotency-Key":"k","Content-Type":"application/json"},
		"requestContext":{"httpMethod":"POST","path":"/orders"},"body":"{}"}`
	const v2JSON = `{"version":"2.0","rawPath":"/orders","headers":{"idempotency-key":"k","content-type":"application/json"},
		"requestContext":{"http":{"method":"POST","path":"/orders"}},"body":"{}"}`
	type answer struct {
		status  int
		headers map[string]string
		body    string
	}
	requireMalformed := func(t *testing.T, out answer, runs int, seen []idempotent.Event) {
		t.Helper()
		assert.Equal(t, http.StatusBadRequest, out.status, out.body)
		assert.Equal(t, nethttp.ContentTypeProblem, out.headers["Content-Type"])
		assert.Empty(t, out.headers[nethttp.HeaderReplayed])
		var p struct{ Type, Detail string }
		require.NoError(t, json.Unmarshal([]byte(out.body), &p))
		assert.Equal(t, nethttp.ProblemMalformedRequest, p.Type)
		assert.Contains(t, p.Detail, "HTTP method")
		assert.Zero(t, runs, "the handler did not run")
		require.Len(t, seen, 1)
		assert.Equal(t, idempotent.OutcomeRejected, seen[0].Outcome)
		assert.ErrorIs(t, seen[0].Err, idempotent.ErrInvalidPayload)
		assert.False(t, seen[0].HandlerRan)
	}
	// An Engine that lets requests without a key through, so the refusal is
	// the adapter's, and tells seen of every outcome.
	engine := func(seen *[]idempotent.Event) *idempotent.Engine {
		return newEngine(idempotent.NewMemoryStore(), idempotent.WithOptionalKey(),
			idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) { *seen = append(*seen, ev) }))
	}
	for _, tt := range []struct{ name, raw string }{
		{"a payload 2.0 event", v2JSON},
		{"no method at all", `{"path":"/orders","headers":{"Idempotency-Key":"k"},"body":"{}"}`},
		{"empty event", `{}`},
	} {
		t.Run("v1/"+tt.name, func(t *testing.T) {
			t.Parallel()
			runs, seen := 0, []idempotent.Event(nil)
			h := apigateway.WrapV1(engine(&seen), func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				runs++
				return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}, nil
			})
			var ev events.APIGatewayProxyRequest
			require.NoError(t, json.Unmarshal([]byte(tt.raw), &ev))
			out, err := h(context.Background(), ev)
			require.NoError(t, err)
			requireMalformed(t, answer{out.StatusCode, out.Headers, out.Body}, runs, seen)
		})
	}
	for _, tt := range []struct{ name, raw string }{
		{"a payload 1.0 event", v1JSON},
		{"no method at all", `{"version":"2.0","rawPath":"/orders","headers":{"idempotency-key":"k"},"body":"{}"}`},
		{"empty event", `{}`},
	} {
		t.Run("v2/"+tt.name, func(t *testing.T) {
			t.Parallel()
			runs, seen := 0, []idempotent.Event(nil)
			h := apigateway.WrapV2(engine(&seen), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK}, nil
			})
			var ev events.APIGatewayV2HTTPRequest
			require.NoError(t, json.Unmarshal([]byte(tt.raw), &ev))
			out, err := h(context.Background(), ev)
			require.NoError(t, err)
			requireMalformed(t, answer{out.StatusCode, out.Headers, out.Body}, runs, seen)
		})
	}
}
