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

// TestEventsFromJSON decodes events the way the Lambda runtime does, so that
// authorizer claims arrive as map[string]any and numbers as float64.
func TestEventsFromJSON(t *testing.T) {
	t.Parallel()
	v1 := func(sub, body string) string {
		return `{"httpMethod":"POST","path":"/orders","resource":"/orders",
			"headers":{"Idempotency-Key":"\"order-1\"","Content-Type":"application/json"},
			"multiValueHeaders":{"Idempotency-Key":["\"order-1\""],"Content-Type":["application/json"]},
			"queryStringParameters":{"dry":"false"},"multiValueQueryStringParameters":{"dry":["false"]},
			"requestContext":{"authorizer":{"claims":{"sub":"` + sub + `","iss":"https://cognito-idp.eu-west-1.amazonaws.com/pool"},"integrationLatency":12},"requestId":"r-` + sub + `"},
			"body":` + body + `,"isBase64Encoded":false}`
	}
	v2 := func(sub, body string) string {
		return `{"version":"2.0","routeKey":"POST /orders","rawPath":"/orders","rawQueryString":"dry=false",
			"headers":{"idempotency-key":"order-1","content-type":"application/json"},
			"requestContext":{"http":{"method":"POST","path":"/orders"},"requestId":"r-` + sub + `",
			"authorizer":{"jwt":{"claims":{"sub":"` + sub + `","iss":"https://issuer"},"scopes":null}}},
			"body":` + body + `,"isBase64Encoded":false}`
	}
	t.Run("v1", func(t *testing.T) {
		t.Parallel()
		runs := 0
		h := apigateway.WrapV1(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			runs++
			return events.APIGatewayProxyResponse{StatusCode: http.StatusCreated, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"order":1}`}, nil
		})
		call := func(raw string) events.APIGatewayProxyResponse {
			var ev events.APIGatewayProxyRequest
			require.NoError(t, json.Unmarshal([]byte(raw), &ev))
			out, err := h(context.Background(), ev)
			require.NoError(t, err)
			return out
		}
		assert.Equal(t, http.StatusCreated, call(v1("alice", `"{\"a\":1,\"b\":2}"`)).StatusCode)
		again := call(v1("alice", `"{\"b\":2, \"a\":1}"`))
		assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
		assert.Equal(t, "application/json", again.Headers["Content-Type"])
		assert.Equal(t, `{"order":1}`, again.Body)
		assert.Equal(t, http.StatusCreated, call(v1("bob", `"{\"a\":1,\"b\":2}"`)).StatusCode)
		assert.Equal(t, 2, runs)
		assert.Equal(t, http.StatusUnprocessableEntity, call(v1("alice", `"{\"a\":2}"`)).StatusCode)
	})
	t.Run("v2", func(t *testing.T) {
		t.Parallel()
		runs := 0
		h := apigateway.WrapV2(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Headers: map[string]string{"content-type": "application/json"}, Cookies: []string{"s=1"}, Body: `{"order":1}`}, nil
		})
		call := func(raw string) events.APIGatewayV2HTTPResponse {
			var ev events.APIGatewayV2HTTPRequest
			require.NoError(t, json.Unmarshal([]byte(raw), &ev))
			out, err := h(context.Background(), ev)
			require.NoError(t, err)
			return out
		}
		first := call(v2("alice", `"{\"a\":1}"`))
		assert.Equal(t, []string{"s=1"}, first.Cookies)
		again := call(v2("alice", `"{ \"a\" : 1 }"`))
		assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
		assert.Equal(t, "application/json", again.Headers["content-type"])
		assert.Empty(t, again.Cookies)
		assert.Equal(t, http.StatusCreated, call(v2("bob", `"{\"a\":1}"`)).StatusCode)
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
