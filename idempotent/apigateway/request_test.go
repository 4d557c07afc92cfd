package apigateway

import (
	"context"
	"encoding/base64"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/sampleevents"
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
			r, err := requestV1(context.Background(), new(requestRoom), &tt.ev)
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
			r, err := requestV2(context.Background(), new(requestRoom), &tt.ev)
			scope := scopeV2(&tt.ev.RequestContext)
			assert.Equal(t, tt.want, read(t, r, err, scope))
		})
	}
}

// TestBodies: a base64 flag on a body that is not base64 (which API Gateway
// never sends) is taken as the text it is, and the handler decides what to
// answer (a body claimed as JSON is then invalid JSON).
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
	assert.Len(t, bodies, 1, "the handler did not run")
}

// TestCanonicalKey checks the names canonicalKey knows against net/http's
// canonical form (given without an allocation), and names it does not know.
func TestCanonicalKey(t *testing.T) { // not parallel: AllocsPerRun
	require.NotEmpty(t, apiGatewayHeaders)
	for _, ck := range apiGatewayHeaders {
		name := strings.ToLower(ck)
		assert.Equal(t, http.CanonicalHeaderKey(name), ck, name)
		assert.Equal(t, ck, canonicalKey(name), name)
		assert.Zero(t, testing.AllocsPerRun(10, func() { _ = canonicalKey(name) }), name)
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
		r, err := requestV2(context.Background(), new(requestRoom), &v2)
		require.NoError(t, err)
		assert.Equal(t, http.Header{"X-A": {"2", "3", "1"}, "Idempotency-Key": {"k"}, "Content-Type": {"text/plain"}, "X-B": {"4"}}, r.Header)

		v1 := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/p",
			MultiValueHeaders: map[string][]string{"x-a": {"1"}, "X-A": {"2", "3"}, "idempotency-key": {"k"}}}
		r, err = requestV1(context.Background(), new(requestRoom), &v1)
		require.NoError(t, err)
		assert.Equal(t, http.Header{"X-A": {"2", "3", "1"}, "Idempotency-Key": {"k"}}, r.Header)
	}
}

// TestRequestsFromFixtures: events as API Gateway sends them become the
// requests a net/http server would have made of them: method, path as
// called (escaped and not), query with every value, headers with every
// value (cookies included), host, client address, body (decoded from
// base64), and the event itself in the context.
func TestRequestsFromFixtures(t *testing.T) {
	t.Parallel()
	type want struct {
		method, path, rawPath, query, host, remote, body string
		header                                           http.Header
	}
	check := func(t *testing.T, r *http.Request, err error, w want) {
		t.Helper()
		require.NoError(t, err)
		assert.Equal(t, w.method, r.Method)
		assert.Equal(t, w.path, r.URL.Path)
		assert.Equal(t, w.rawPath, r.URL.RawPath)
		assert.Equal(t, w.query, r.URL.RawQuery)
		assert.Equal(t, w.host, r.Host)
		assert.Equal(t, w.remote, r.RemoteAddr)
		assert.Equal(t, w.header, r.Header)
		assert.Equal(t, "HTTP/1.1", r.Proto)
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		assert.Equal(t, w.body, string(body))
		assert.Equal(t, int64(len(w.body)), r.ContentLength)
	}
	payment := `{"customerId":"cus_NffrFeUfNV2Hib","amount":2500,"currency":"EUR"}`

	t.Run("v2", func(t *testing.T) {
		t.Parallel()
		ev, err := sampleevents.HTTP(sampleevents.PaymentNew)
		require.NoError(t, err)
		header := http.Header{}
		for k, v := range ev.Headers {
			header[http.CanonicalHeaderKey(k)] = []string{v}
		}
		base := want{method: "POST", path: "/payments", host: "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com", remote: "203.0.113.10", body: payment, header: header}
		tests := []struct {
			name string
			edit func(*events.APIGatewayV2HTTPRequest)
			want func(*want)
		}{
			{"as sent", func(*events.APIGatewayV2HTTPRequest) {}, func(*want) {}},
			{"query with repeated names", func(ev *events.APIGatewayV2HTTPRequest) {
				ev.RawQueryString, ev.QueryStringParameters = "tag=x&currency=EUR&tag=y", map[string]string{"tag": "x,y", "currency": "EUR"}
			}, func(w *want) { w.query = "tag=x&currency=EUR&tag=y" }},
			{"cookies", func(ev *events.APIGatewayV2HTTPRequest) { ev.Cookies = []string{"theme=dark", "lang=en"} },
				func(w *want) { w.header = maps.Clone(w.header); w.header["Cookie"] = []string{"theme=dark; lang=en"} }},
			{"escaped path", func(ev *events.APIGatewayV2HTTPRequest) { ev.RawPath = "/payments/a%2Fb" },
				func(w *want) { w.path, w.rawPath = "/payments/a/b", "/payments/a%2Fb" }},
			{"base64 body", func(ev *events.APIGatewayV2HTTPRequest) {
				ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(payment)), true
			}, func(*want) {}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ev := ev
				ev.Headers = maps.Clone(ev.Headers)
				tt.edit(&ev)
				w := base
				tt.want(&w)
				inv := &invocationV2{ev: ev}
				r, err := requestV2(context.WithValue(t.Context(), invocationKey{}, inv), &inv.room, &inv.ev)
				check(t, r, err, w)
				got, ok := RequestV2FromContext(r.Context())
				require.True(t, ok)
				assert.Equal(t, ev.RequestContext.RequestID, got.RequestContext.RequestID, "the event, in the context")
				_, ok = RequestV1FromContext(r.Context())
				assert.False(t, ok, "not a payload 1.0 event")
			})
		}
	})
	t.Run("v1", func(t *testing.T) {
		t.Parallel()
		b, err := os.ReadFile(filepath.Join("testdata", "rest-payment.json"))
		require.NoError(t, err)
		var ev events.APIGatewayProxyRequest
		require.NoError(t, sampleevents.DecodeStrict(b, &ev))
		header := http.Header{}
		for k, vs := range ev.MultiValueHeaders {
			header[http.CanonicalHeaderKey(k)] = vs
		}
		base := want{method: "POST", path: "/payments", query: "currency=EUR&tag=x&tag=y", host: "x1y2z3.execute-api.eu-west-1.amazonaws.com",
			remote: "203.0.113.10", body: payment, header: header}
		tests := []struct {
			name string
			edit func(*events.APIGatewayProxyRequest)
			want func(*want)
		}{
			{"as sent", func(*events.APIGatewayProxyRequest) {}, func(*want) {}},
			{"single-value maps only", func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders, ev.MultiValueQueryStringParameters = nil, nil
			}, func(w *want) {
				w.query = "currency=EUR&tag=y"
				w.header = http.Header{}
				for k, v := range ev.Headers {
					w.header[k] = []string{v}
				}
			}},
			{"header names in any case", func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders = map[string][]string{"IDEMPOTENCY-KEY": {"k"}, "content-type": {"application/json"}}
				ev.Headers = map[string]string{"idempotency-key": "k", "CONTENT-TYPE": "application/json"}
			}, func(w *want) {
				w.header = http.Header{"Idempotency-Key": {"k"}, "Content-Type": {"application/json"}}
			}},
			{"base64 body", func(ev *events.APIGatewayProxyRequest) {
				ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(payment)), true
			}, func(*want) {}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ev := ev
				tt.edit(&ev)
				w := base
				tt.want(&w)
				inv := &invocationV1{ev: ev}
				r, err := requestV1(context.WithValue(t.Context(), invocationKey{}, inv), &inv.room, &inv.ev)
				check(t, r, err, w)
				got, ok := RequestV1FromContext(r.Context())
				require.True(t, ok)
				assert.Equal(t, ev.StageVariables, got.StageVariables, "the event, in the context")
				_, ok = RequestV2FromContext(r.Context())
				assert.False(t, ok, "not a payload 2.0 event")
			})
		}
	})
}

// TestBase64Fingerprint: a base64 body is fingerprinted as the bytes it
// decodes to, so it is the same request as those bytes sent plain.
func TestBase64Fingerprint(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name              string
		ctype             string
		first, then       string // bodies
		firstB64, thenB64 bool
		replayed          bool
	}{
		{"base64 body equals plain body", "application/json", `{"a":1}`, b64(`{ "a" : 1 }`), false, true, true},
		{"base64 binary differs", "application/octet-stream", b64("\x00\x01"), b64("\x00\x02"), true, true, false},
		{"base64 binary equal", "application/octet-stream", b64("\x00\x01"), b64("\x00\x01"), true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := WrapV2(idempotent.New(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: "first-response-secret"}, nil
			})
			call := func(body string, b64 bool) events.APIGatewayV2HTTPResponse {
				ev := events.APIGatewayV2HTTPRequest{RawPath: "/p", Headers: map[string]string{"idempotency-key": "k", "content-type": tt.ctype}, Body: body, IsBase64Encoded: b64}
				ev.RequestContext.HTTP.Method = http.MethodPost
				out, err := h(t.Context(), ev)
				require.NoError(t, err)
				return out
			}
			require.Equal(t, http.StatusCreated, call(tt.first, tt.firstB64).StatusCode)
			second := call(tt.then, tt.thenB64)
			if tt.replayed {
				assert.Equal(t, "true", second.Headers[nethttp.HeaderReplayed])
				return
			}
			assert.Equal(t, http.StatusUnprocessableEntity, second.StatusCode)
			assert.Contains(t, second.Body, nethttp.ProblemPayloadMismatch)
			assert.NotContains(t, second.Body, "first-response-secret")
		})
	}
}
