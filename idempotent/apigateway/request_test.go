package apigateway

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// request is what the middleware reads of the HTTP request an event
// becomes (and the scope it names), for the translation tests.
type request struct {
	method      string   // upper case
	path        string   // escaped, as fingerprinted
	query       string   // canonical
	keyValues   []string // the Idempotency-Key header's values
	contentType string
	body        string // decoded
	scope       string
}

// canonicalQuery is the query as the middleware fingerprints it (sorted by
// name; one that does not parse, as given), so the cases read as before.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return "\x00raw\x00" + raw
	}
	return values.Encode()
}

func read(t *testing.T, r *http.Request, err error, scope string) request {
	t.Helper()
	require.NoError(t, err)
	body, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return request{
		method: strings.ToUpper(r.Method), path: r.URL.EscapedPath(), query: canonicalQuery(r.URL.RawQuery),
		keyValues: r.Header.Values(nethttp.HeaderIdempotencyKey), contentType: r.Header.Get("Content-Type"), body: string(body), scope: scope,
	}
}

func TestRequestV1(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   events.APIGatewayProxyRequest
		want request
	}{
		{
			name: "as API Gateway sends it",
			ev: events.APIGatewayProxyRequest{
				HTTPMethod: "post", Path: "/orders/7", Resource: "/orders/{id}",
				Headers:                         map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k2"},
				MultiValueHeaders:               map[string][]string{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1", "k2"}},
				QueryStringParameters:           map[string]string{"b": "2", "a": "3"},
				MultiValueQueryStringParameters: map[string][]string{"b": {"2"}, "a": {"1", "3"}},
				Body:                            "e30=", IsBase64Encoded: true,
			},
			want: request{method: "POST", path: "/orders/7", query: "a=1&a=3&b=2", keyValues: []string{"k1", "k2"}, contentType: "application/json", body: "{}", scope: anonymous},
		},
		{
			name: "single-value maps and request context only",
			ev: events.APIGatewayProxyRequest{
				Headers:               map[string]string{"idempotency-key": "k"},
				QueryStringParameters: map[string]string{"q": "a b"},
				RequestContext:        events.APIGatewayProxyRequestContext{HTTPMethod: "PATCH", Path: "/x"},
			},
			want: request{method: "PATCH", path: "/x", query: "q=a+b", keyValues: []string{"k"}, scope: anonymous},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := requestV1(context.Background(), &tt.ev)
			scope := scopeV1(&tt.ev.RequestContext)
			assert.Equal(t, tt.want, read(t, r, err, scope))
		})
	}
}

func TestRequestV2(t *testing.T) {
	t.Parallel()
	withHTTP := func(ev events.APIGatewayV2HTTPRequest, method, path string) events.APIGatewayV2HTTPRequest {
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
		return ev
	}
	tests := []struct {
		name string
		ev   events.APIGatewayV2HTTPRequest
		want request
	}{
		{
			name: "as API Gateway sends it",
			ev: withHTTP(events.APIGatewayV2HTTPRequest{
				RawPath: "/prod/orders", RawQueryString: "b=2&a=%20x&a=1",
				QueryStringParameters: map[string]string{"a": " x,1", "b": "2"},
				Headers:               map[string]string{"content-type": "text/plain", "idempotency-key": "a, b"},
				Body:                  "hi",
			}, "POST", "/orders"),
			want: request{method: "POST", path: "/prod/orders", query: "a=+x&a=1&b=2", keyValues: []string{"a, b"}, contentType: "text/plain", body: "hi", scope: anonymous},
		},
		{
			name: "no raw path or raw query",
			ev:   withHTTP(events.APIGatewayV2HTTPRequest{QueryStringParameters: map[string]string{"z": "1", "a": "x,y"}}, "patch", "/p"),
			want: request{method: "PATCH", path: "/p", query: "a=x%2Cy&z=1", scope: anonymous},
		},
		{
			name: "unparseable raw query counts as given",
			ev:   withHTTP(events.APIGatewayV2HTTPRequest{RawPath: "/p", RawQueryString: "a=%zz"}, "POST", "/p"),
			want: request{method: "POST", path: "/p", query: "\x00raw\x00a=%zz", scope: anonymous},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := requestV2(context.Background(), &tt.ev)
			scope := scopeV2(&tt.ev.RequestContext)
			assert.Equal(t, tt.want, read(t, r, err, scope))
		})
	}
}

// TestBodies: a base64 flag on a body that is not base64 (which API Gateway
// never sends) is taken as the text it is, and the handler decides what to
// answer; a JSON body nested too deeply is invalid JSON, and the handler
// does not run.
func TestBodies(t *testing.T) {
	t.Parallel()
	var bodies []string
	h := WrapV2(idempotent.New(idempotent.NewMemoryStore()), func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		bodies = append(bodies, ev.Body)
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK}, nil
	})
	call := func(key, ctype, body string, b64 bool) events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/p", Headers: map[string]string{"idempotency-key": key, "content-type": ctype}, Body: body, IsBase64Encoded: b64}
		ev.RequestContext.HTTP.Method = http.MethodPost
		out, err := h(context.Background(), ev)
		require.NoError(t, err)
		return out
	}
	assert.Equal(t, http.StatusOK, call("k1", "text/plain", "not base64!", true).StatusCode)
	assert.Equal(t, []string{"not base64!"}, bodies, "the handler gets its event as it is")
	bad := call("k2", "application/json", "not base64!", true)
	assert.Equal(t, http.StatusBadRequest, bad.StatusCode, "the text is not JSON")
	assert.Contains(t, bad.Body, nethttp.ProblemInvalidJSON)
	runs := len(bodies)

	deep := call("k3", "application/json", strings.Repeat("[", 600)+strings.Repeat("]", 600), false)
	assert.Equal(t, http.StatusBadRequest, deep.StatusCode)
	assert.Contains(t, deep.Body, nethttp.ProblemInvalidJSON)
	assert.Contains(t, deep.Body, "nested too deeply")
	assert.Equal(t, runs, len(bodies))
}

// TestCanonicalKey checks the table of frequent header names against
// net/http's canonical form, and names outside it.
func TestCanonicalKey(t *testing.T) {
	t.Parallel()
	require.NotEmpty(t, apiGatewayHeaders)
	for name, ck := range apiGatewayHeaders {
		assert.Equal(t, http.CanonicalHeaderKey(name), ck, name)
		assert.Equal(t, strings.ToLower(ck), name)
	}
	for _, name := range []string{"x-custom-thing", "X-CUSTOM", "idempotency-key", "Idempotency-Key", "IDEMPOTENCY-KEY", "bad header", "ünicode", ""} {
		assert.Equal(t, http.CanonicalHeaderKey(name), canonicalKey(name), name)
	}
}

// TestHeaderNamesInTwoCases: names of an event's header map that differ
// only in case (possible in hand-written events) give the canonical name
// the values of all of them, in the order of the names, whatever the map's
// order; other headers keep their one value.
func TestHeaderNamesInTwoCases(t *testing.T) {
	t.Parallel()
	for range 20 { // map order varies from run to run
		v2 := events.APIGatewayV2HTTPRequest{RawPath: "/p", Headers: map[string]string{
			"x-a": "1", "X-A": "2", "x-A": "3", "idempotency-key": "k", "content-type": "text/plain", "x-b": "4"}}
		v2.RequestContext.HTTP.Method = "POST"
		r, err := requestV2(context.Background(), &v2)
		require.NoError(t, err)
		assert.Equal(t, http.Header{"X-A": {"2", "3", "1"}, "Idempotency-Key": {"k"}, "Content-Type": {"text/plain"}, "X-B": {"4"}}, r.Header)

		v1 := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/p",
			MultiValueHeaders: map[string][]string{"x-a": {"1"}, "X-A": {"2", "3"}, "idempotency-key": {"k"}}}
		r, err = requestV1(context.Background(), &v1)
		require.NoError(t, err)
		assert.Equal(t, http.Header{"X-A": {"2", "3", "1"}, "Idempotency-Key": {"k"}}, r.Header)
	}
}
