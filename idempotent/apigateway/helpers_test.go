package apigateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/sampleevents"
)

// req is a request in a form neutral to the payload version; each flavor
// turns it into its event.
type req struct {
	method  string            // default POST
	path    string            // default /payments
	query   string            // raw query string
	headers map[string]string // as sent; v2 lower-cases the names
	body    string
	base64  bool
	sub     string // authenticated subject; "" is anonymous
	// lambdaAuth is a Lambda authorizer's context (v1: flattened into the
	// authorizer map, with any principalId; v2: authorizer.lambda).
	lambdaAuth map[string]any
}

// resp is a response in a form neutral to the payload version. cookies holds
// the v2 Cookies and, for both versions, any Set-Cookie header.
type resp struct {
	status  int
	headers map[string]string
	multi   map[string][]string
	cookies []string
	body    string
	base64  bool
}

type handler func(ctx context.Context, r req) (resp, error)

// newEngine is a test's Engine over store, configured by opts; its logs are
// discarded unless opts give idempotent.WithLogger.
func newEngine(store storage.Store, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
}

// flavor serves a neutral handler through one of the package's doors and
// returns a neutral caller, which asserts that the door never returns an
// error.
type flavor struct {
	name string
	wrap func(t testing.TB, e *idempotent.Engine, h handler, opts ...apigateway.Option) func(req) resp
}

// flavors are the typed layer's: WrapV1 and WrapV2.
var flavors = []flavor{
	{name: "v1", wrap: wrapV1},
	{name: "v2", wrap: wrapV2},
}

// doors are every door: the typed layer's flavors, and HandlerV1 and
// HandlerV2 around nethttp.Middleware around an http.Handler.
var doors = append([]flavor{
	{name: "v1 http.Handler", wrap: handlerV1},
	{name: "v2 http.Handler", wrap: handlerV2},
}, flavors...)

func (r req) withDefaults() req {
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/payments"
	}
	return r
}

// eventV1 is r as a REST API event.
func eventV1(t testing.TB, r req) events.APIGatewayProxyRequest {
	r = r.withDefaults()
	ev := events.APIGatewayProxyRequest{HTTPMethod: r.method, Path: r.path, Resource: r.path, Body: r.body, IsBase64Encoded: r.base64}
	if len(r.headers) > 0 {
		ev.Headers = r.headers
		ev.MultiValueHeaders = map[string][]string{}
		for k, v := range r.headers {
			ev.MultiValueHeaders[k] = []string{v}
		}
	}
	if r.query != "" {
		q, err := url.ParseQuery(r.query)
		require.NoError(t, err)
		ev.MultiValueQueryStringParameters = q
		ev.QueryStringParameters = map[string]string{}
		for k, v := range q {
			ev.QueryStringParameters[k] = v[len(v)-1]
		}
	}
	if r.sub != "" {
		ev.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": r.sub, "iss": "https://issuer.example"}}
	}
	if r.lambdaAuth != nil {
		ev.RequestContext.Authorizer = maps.Clone(r.lambdaAuth)
	}
	return ev
}

// eventV2 is r as an HTTP API event.
func eventV2(t testing.TB, r req) events.APIGatewayV2HTTPRequest {
	r = r.withDefaults()
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: r.path, RawQueryString: r.query, Body: r.body, IsBase64Encoded: r.base64}
	ev.RequestContext.HTTP.Method = r.method
	ev.RequestContext.HTTP.Path = r.path
	if len(r.headers) > 0 {
		ev.Headers = map[string]string{}
		for k, v := range r.headers {
			ev.Headers[strings.ToLower(k)] = v
		}
	}
	if r.query != "" {
		q, err := url.ParseQuery(r.query)
		require.NoError(t, err)
		ev.QueryStringParameters = map[string]string{}
		for k, v := range q {
			ev.QueryStringParameters[k] = strings.Join(v, ",")
		}
	}
	if r.sub != "" {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": r.sub, "iss": "https://issuer.example"}},
		}
	}
	if r.lambdaAuth != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: maps.Clone(r.lambdaAuth)}
	}
	return ev
}

func wrapV1(t testing.TB, e *idempotent.Engine, h handler, opts ...apigateway.Option) func(req) resp {
	wrapped := apigateway.WrapV1(e, func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		out, err := h(ctx, req{method: ev.HTTPMethod, path: ev.Path, headers: ev.Headers, body: ev.Body, base64: ev.IsBase64Encoded})
		multi := maps.Clone(out.multi)
		if len(out.cookies) > 0 {
			if multi == nil {
				multi = map[string][]string{}
			}
			multi["Set-Cookie"] = out.cookies
		}
		return events.APIGatewayProxyResponse{StatusCode: out.status, Headers: out.headers, MultiValueHeaders: multi, Body: out.body, IsBase64Encoded: out.base64}, err
	}, opts...)
	return func(r req) resp {
		t.Helper()
		out, err := wrapped(context.Background(), eventV1(t, r))
		require.NoError(t, err, "the adapter must never return an error")
		return fromProxy(out.StatusCode, out.Headers, out.MultiValueHeaders, nil, out.Body, out.IsBase64Encoded)
	}
}

func wrapV2(t testing.TB, e *idempotent.Engine, h handler, opts ...apigateway.Option) func(req) resp {
	wrapped := apigateway.WrapV2(e, func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		out, err := h(ctx, req{method: ev.RequestContext.HTTP.Method, path: ev.RawPath, query: ev.RawQueryString, headers: ev.Headers, body: ev.Body, base64: ev.IsBase64Encoded})
		return events.APIGatewayV2HTTPResponse{StatusCode: out.status, Headers: out.headers, MultiValueHeaders: out.multi, Cookies: out.cookies, Body: out.body, IsBase64Encoded: out.base64}, err
	}, opts...)
	return func(r req) resp {
		t.Helper()
		out, err := wrapped(context.Background(), eventV2(t, r))
		require.NoError(t, err, "the adapter must never return an error")
		return fromProxy(out.StatusCode, out.Headers, out.MultiValueHeaders, out.Cookies, out.Body, out.IsBase64Encoded)
	}
}

// asHTTP is a neutral handler as an http.Handler, failing with nethttp.Fail.
func asHTTP(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in := req{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, headers: map[string]string{}, body: string(body)}
		for k := range r.Header {
			in.headers[k] = r.Header.Get(k)
		}
		out, err := h(r.Context(), in)
		if err != nil {
			nethttp.Fail(w, err)
			return
		}
		for k, v := range out.headers {
			w.Header().Set(k, v)
		}
		for k, vs := range out.multi {
			w.Header()[k] = vs
		}
		for _, c := range out.cookies {
			w.Header().Add("Set-Cookie", c)
		}
		w.WriteHeader(out.status)
		_, _ = io.WriteString(w, out.body)
	})
}

func handlerV1(t testing.TB, e *idempotent.Engine, h handler, opts ...apigateway.Option) func(req) resp {
	served := apigateway.HandlerV1(nethttp.Middleware(e)(asHTTP(h)), opts...)
	return func(r req) resp {
		t.Helper()
		out, err := served(context.Background(), eventV1(t, r))
		require.NoError(t, err, "the door must never return an error")
		return fromProxy(out.StatusCode, out.Headers, out.MultiValueHeaders, nil, out.Body, out.IsBase64Encoded)
	}
}

func handlerV2(t testing.TB, e *idempotent.Engine, h handler, opts ...apigateway.Option) func(req) resp {
	served := apigateway.HandlerV2(nethttp.Middleware(e)(asHTTP(h)), opts...)
	return func(r req) resp {
		t.Helper()
		out, err := served(context.Background(), eventV2(t, r))
		require.NoError(t, err, "the door must never return an error")
		return fromProxy(out.StatusCode, out.Headers, out.MultiValueHeaders, out.Cookies, out.Body, out.IsBase64Encoded)
	}
}

// fromProxy collects a proxy response, moving Set-Cookie headers to cookies.
func fromProxy(status int, headers map[string]string, multi map[string][]string, cookies []string, body string, b64 bool) resp {
	r := resp{status: status, cookies: append([]string(nil), cookies...), body: body, base64: b64}
	for k, v := range headers {
		if strings.EqualFold(k, "Set-Cookie") {
			r.cookies = append(r.cookies, v)
			continue
		}
		if r.headers == nil {
			r.headers = map[string]string{}
		}
		r.headers[k] = v
	}
	for k, v := range multi {
		if strings.EqualFold(k, "Set-Cookie") {
			r.cookies = append(r.cookies, v...)
			continue
		}
		if r.multi == nil {
			r.multi = map[string][]string{}
		}
		r.multi[k] = v
	}
	return r
}

// post is a JSON POST with an Idempotency-Key.
func post(key, body string) req {
	return req{headers: map[string]string{"Idempotency-Key": key, "Content-Type": "application/json"}, body: body}
}

// counter is a handler answering 200 with a JSON body that numbers its runs.
type counter struct{ runs atomic.Int32 }

func (c *counter) handle(_ context.Context, r req) (resp, error) {
	n := c.runs.Add(1)
	body, _ := json.Marshal(map[string]any{"run": n, "path": r.path})
	return resp{status: http.StatusOK, headers: map[string]string{"Content-Type": "application/json"}, body: string(body)}, nil
}

func (c *counter) count() int { return int(c.runs.Load()) }

// replayed reports whether a response carries Idempotent-Replayed: true.
func replayed(r resp) bool { return r.headers[nethttp.HeaderReplayed] == "true" }

// requireProblem asserts an application/problem+json answer of the given
// status and type, and returns its detail.
func requireProblem(t testing.TB, r resp, status int, typ string) string {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	assert.Equal(t, nethttp.ContentTypeProblem, r.headers["Content-Type"])
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &p))
	assert.Equal(t, typ, p.Type)
	assert.Equal(t, status, p.Status)
	assert.NotEmpty(t, p.Title)
	assert.NotEmpty(t, p.Detail)
	assert.False(t, replayed(r), "a problem is never a replay")
	return p.Detail
}

// fakeStore puts faults in front of a MemoryStore; nil functions delegate.
type fakeStore struct {
	storage.StepStore
	claim    func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error)
	complete func(ctx context.Context, rec storage.Record) error
}

func (s *fakeStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if s.claim != nil {
		return s.claim(ctx, rec, now)
	}
	return s.StepStore.Claim(ctx, rec, now)
}

func (s *fakeStore) Complete(ctx context.Context, rec storage.Record) error {
	if s.complete != nil {
		return s.complete(ctx, rec)
	}
	return s.StepStore.Complete(ctx, rec)
}

// fixtureV2 is an HTTP API (payload 2.0) event of the repository's events/
// folder, as Lambda delivers it (see internal/sampleevents).
func fixtureV2(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev, err := sampleevents.HTTP(name)
	require.NoError(t, err)
	return ev
}

// fixtureV1 is a REST API (payload 1.0) event of testdata/, as Lambda
// delivers it.
func fixtureV1(t testing.TB, name string) events.APIGatewayProxyRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev events.APIGatewayProxyRequest
	require.NoError(t, sampleevents.DecodeStrict(b, &ev))
	return ev
}

// restPayment is testdata/rest-payment.json: caller Alice (a Cognito user
// pool authorizer) posts events/payments-new.json's payment.
const restPayment = "rest-payment.json"
