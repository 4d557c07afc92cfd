package nethttp_test

// One table of cases for both HTTP front doors: the API Gateway adapter
// (events in, events out, payload 1.0 and 2.0) and the net/http middleware
// (a real server on 127.0.0.1). Each door is reached through a small driver
// that speaks a neutral request and response, so a rule that differs between
// them fails here, whatever their own tests say.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/testlog"
)

// request is what a client sends, neutral to the front door.
type request struct {
	method string // default POST
	path   string // default /payments
	query  string // raw
	key    string // the Idempotency-Key header as sent; "" sends none
	ctype  string // default application/json
	body   string
	// header is more request headers; the handler reads its instructions
	// from them (see conformanceHandler), and they are not fingerprinted.
	header map[string]string
}

// response is what the client receives, neutral to the front door.
type response struct {
	status int
	header http.Header
	body   string
}

// reply is what a handler answers, neutral to the front door; err makes the
// API Gateway handler return an error and the net/http handler panic.
type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

// driver starts one front door over store, in front of handler, with the
// core options given, and returns the client's side of it.
type driver struct {
	name  string
	start func(t *testing.T, store storage.StepStore, handler func(context.Context, request) reply, core ...idempotent.Option) func(request) response
}

var drivers = []driver{
	{name: "apigateway v1", start: startV1},
	{name: "apigateway v2", start: startV2},
	{name: "apigateway v2 http.Handler", start: startHandlerV2},
	{name: "nethttp", start: startNetHTTP},
}

func (r request) withDefaults() request {
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/payments"
	}
	if r.ctype == "" {
		r.ctype = "application/json"
	}
	return r
}

// headers returns the request's headers as a client sends them.
func (r request) headers() http.Header {
	h := http.Header{}
	h.Set("Content-Type", r.ctype)
	if r.key != "" {
		h.Set(nethttp.HeaderIdempotencyKey, r.key)
	}
	for k, v := range r.header {
		h.Set(k, v)
	}
	return h
}

// conformanceEngine is the engine of one front door under test, quiet unless core
// says otherwise.
func conformanceEngine(store storage.StepStore, core []idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithLogger(testlog.Logger(io.Discard))}, core...)...)
}

func startV1(t *testing.T, store storage.StepStore, handler func(context.Context, request) reply, core ...idempotent.Option) func(request) response {
	t.Helper()
	h := apigateway.WrapV1(conformanceEngine(store, core), func(ctx context.Context, ev lambdaevents.APIGatewayProxyRequest) (lambdaevents.APIGatewayProxyResponse, error) {
		in := request{method: ev.HTTPMethod, path: ev.Path, body: ev.Body, header: map[string]string{}}
		for k, v := range ev.MultiValueHeaders {
			in.header[k] = strings.Join(v, ",")
		}
		out := handler(ctx, in)
		return lambdaevents.APIGatewayProxyResponse{StatusCode: out.status, MultiValueHeaders: out.header, Body: out.body}, out.err
	})
	return func(r request) response {
		r = r.withDefaults()
		query, err := url.ParseQuery(r.query)
		require.NoError(t, err)
		ev := lambdaevents.APIGatewayProxyRequest{HTTPMethod: r.method, Path: r.path, MultiValueHeaders: r.headers(), Body: r.body}
		if len(query) > 0 {
			ev.MultiValueQueryStringParameters = query
		}
		out, err := h(t.Context(), ev)
		require.NoError(t, err, "the adapter never returns an error")
		header := http.Header{}
		for k, v := range out.Headers {
			header.Set(k, v)
		}
		for k, vs := range out.MultiValueHeaders {
			header.Del(k)
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		return response{status: out.StatusCode, header: header, body: out.Body}
	}
}

func startV2(t *testing.T, store storage.StepStore, handler func(context.Context, request) reply, core ...idempotent.Option) func(request) response {
	t.Helper()
	h := apigateway.WrapV2(conformanceEngine(store, core), func(ctx context.Context, ev lambdaevents.APIGatewayV2HTTPRequest) (lambdaevents.APIGatewayV2HTTPResponse, error) {
		in := request{method: ev.RequestContext.HTTP.Method, path: ev.RawPath, query: ev.RawQueryString, body: ev.Body, header: ev.Headers}
		out := handler(ctx, in)
		resp := lambdaevents.APIGatewayV2HTTPResponse{StatusCode: out.status, Headers: map[string]string{}, Body: out.body}
		for k, v := range out.header {
			if k == "Set-Cookie" {
				resp.Cookies = v // payload 2.0's own place for cookies
				continue
			}
			resp.Headers[k] = strings.Join(v, ",")
		}
		return resp, out.err
	})
	return func(r request) response {
		r = r.withDefaults()
		ev := lambdaevents.APIGatewayV2HTTPRequest{RawPath: r.path, RawQueryString: r.query, Headers: map[string]string{}, Body: r.body}
		for k, v := range r.headers() {
			ev.Headers[strings.ToLower(k)] = strings.Join(v, ",") // as API Gateway sends them
		}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = r.method, r.path
		out, err := h(t.Context(), ev)
		require.NoError(t, err, "the adapter never returns an error")
		header := http.Header{}
		for k, v := range out.Headers {
			header.Set(k, v)
		}
		for k, vs := range out.MultiValueHeaders {
			header.Del(k)
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		for _, c := range out.Cookies {
			header.Add("Set-Cookie", c)
		}
		return response{status: out.StatusCode, header: header, body: out.Body}
	}
}

// startHandlerV2 is the API Gateway door around an http.Handler, with
// nethttp.Middleware around the handler; a failing handler calls
// nethttp.Fail.
func startHandlerV2(t *testing.T, store storage.StepStore, handler func(context.Context, request) reply, core ...idempotent.Option) func(request) response {
	t.Helper()
	idem := nethttp.Middleware(conformanceEngine(store, core), nethttp.WithScope(apigateway.Scope))
	h := apigateway.HandlerV2(idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		in := request{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, body: string(body), header: map[string]string{}}
		for k, v := range r.Header {
			in.header[k] = strings.Join(v, ",")
		}
		out := handler(r.Context(), in)
		if out.err != nil {
			nethttp.Fail(w, out.err)
			return
		}
		for k, v := range out.header {
			w.Header()[k] = v
		}
		w.WriteHeader(out.status)
		_, _ = io.WriteString(w, out.body)
	})))
	return func(r request) response {
		r = r.withDefaults()
		ev := lambdaevents.APIGatewayV2HTTPRequest{RawPath: r.path, RawQueryString: r.query, Headers: map[string]string{}, Body: r.body}
		for k, v := range r.headers() {
			ev.Headers[strings.ToLower(k)] = strings.Join(v, ",") // as API Gateway sends them
		}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = r.method, r.path
		out, err := h(t.Context(), ev)
		require.NoError(t, err, "the door never returns an error")
		header := http.Header{}
		for k, v := range out.Headers {
			header.Set(k, v)
		}
		for k, vs := range out.MultiValueHeaders {
			header.Del(k)
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		for _, c := range out.Cookies {
			header.Add("Set-Cookie", c)
		}
		return response{status: out.StatusCode, header: header, body: out.Body}
	}
}

func startNetHTTP(t *testing.T, store storage.StepStore, handler func(context.Context, request) reply, core ...idempotent.Option) func(request) response {
	t.Helper()
	idem := nethttp.Middleware(conformanceEngine(store, core))
	srv := httptest.NewServer(idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		in := request{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, body: string(body), header: map[string]string{}}
		for k, v := range r.Header {
			in.header[k] = strings.Join(v, ",")
		}
		out := handler(r.Context(), in)
		if out.err != nil {
			panic(out.err) // the net/http way of failing
		}
		for k, v := range out.header {
			w.Header()[k] = v
		}
		w.WriteHeader(out.status)
		_, _ = io.WriteString(w, out.body)
	})))
	t.Cleanup(srv.Close)
	client := srv.Client()
	return func(r request) response {
		r = r.withDefaults()
		u := srv.URL + r.path
		if r.query != "" {
			u += "?" + r.query
		}
		hr, err := http.NewRequestWithContext(t.Context(), r.method, u, strings.NewReader(r.body))
		require.NoError(t, err)
		hr.Header = r.headers()
		resp, err := client.Do(hr)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
	}
}

// Instructions to conformanceHandler, in request headers (which no front
// door fingerprints).
const (
	hdrStatus = "X-Test-Status" // answer with this status (default 201)
	hdrFail   = "X-Test-Fail"   // fail: an error (API Gateway) or a panic (net/http)
	hdrHold   = "X-Test-Hold"   // wait for the case to release the request
	hdrExtra  = "X-Test-Extra"  // add headers the record must leave out
)

// A fixed Date far in the past: a replay must not carry it.
const staleDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// conformanceHandler answers every request the same way on every front
// door: JSON that numbers its runs and echoes the body, with a Location and
// a custom header to be replayed.
type conformanceHandler struct {
	runs             atomic.Int32
	started, release chan struct{}
}

func (h *conformanceHandler) serve(_ context.Context, r request) reply {
	n := h.runs.Add(1)
	get := func(name string) string {
		for k, v := range r.header {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
	if get(hdrHold) != "" {
		h.started <- struct{}{}
		<-h.release
	}
	if get(hdrFail) != "" {
		return reply{err: errors.New("card declined")}
	}
	status := http.StatusCreated
	if s := get(hdrStatus); s != "" {
		status, _ = strconv.Atoi(s)
	}
	header := http.Header{"Content-Type": {"application/json"}, "Location": {"/payments/1"}, "X-Custom": {"kept"}}
	if get(hdrExtra) != "" {
		header.Set("Date", staleDate)
		header.Add("Set-Cookie", "session=secret; HttpOnly")
		header.Set("Keep-Alive", "timeout=5")
		header.Set("Connection", "X-Hop")
		header.Set("X-Hop", "named by Connection")
		header.Set("Proxy-Authenticate", "Basic")
	}
	body, _ := json.Marshal(map[string]any{"run": n, "body": r.body})
	return reply{status: status, header: header, body: string(body)}
}

// step is one request of a case and what its answer must be.
type step struct {
	name    string
	advance time.Duration // move the clock first
	req     request
	// hold sends the request in the background, its handler held until the
	// case's steps have all run; the answer is checked then.
	hold bool

	status   int
	problem  string // the problem type; "" for the handler's own answer
	replayed bool
	runs     int // handler runs after this step (checked for steps not held)
	check    func(t *testing.T, got, first response)
}

// conformanceCase is a sequence of steps on one fresh front door.
type conformanceCase struct {
	name  string
	steps []step
}

func conformanceCases() []conformanceCase {
	post := func(key, body string) request { return request{key: key, body: body} }
	with := func(r request, f func(*request)) request { f(&r); return r }
	header := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	sameBody := func(t *testing.T, got, first response) {
		t.Helper()
		assert.Equal(t, first.body, got.body, "the first response's body, byte for byte")
		assert.Equal(t, "/payments/1", got.header.Get("Location"))
		assert.Equal(t, "kept", got.header.Get("X-Custom"))
		assert.Equal(t, "application/json", got.header.Get("Content-Type"))
	}
	mismatch := func(name string, r request) step {
		return step{name: name, req: r, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch, runs: 1}
	}
	transient := func(status int) conformanceCase {
		r := with(post("k-"+strconv.Itoa(status), `{}`), func(r *request) { r.header = header(hdrStatus, strconv.Itoa(status)) })
		return conformanceCase{name: fmt.Sprintf("%d not stored", status), steps: []step{
			{name: "first", req: r, status: status, runs: 1},
			{name: "retry runs again", req: r, status: status, runs: 2},
		}}
	}
	cases := []conformanceCase{
		{name: "new key stored and replayed", steps: []step{
			{name: "first", req: post("k1", `{"amount":100}`), status: http.StatusCreated, runs: 1},
			{name: "retry", req: post("k1", `{"amount":100}`), status: http.StatusCreated, replayed: true, runs: 1, check: sameBody},
			{name: "quoted form of the same key", req: post(`"k1"`, `{"amount":100}`), status: http.StatusCreated, replayed: true, runs: 1, check: sameBody},
			{name: "another key runs", req: post("k2", `{"amount":100}`), status: http.StatusCreated, runs: 2},
		}},
		{name: "missing key", steps: []step{
			{name: "no header", req: post("", `{}`), status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey},
		}},
		{name: "malformed key", steps: []step{
			{name: "unterminated quote", req: post(`"abc`, `{}`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
			{name: "too long", req: post(strings.Repeat("k", nethttp.MaxKeyLength+1), `{}`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
			{name: "not ASCII", req: post("clé", `{}`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
			{name: "a bare comma", req: post("a,b", `{}`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
		}},
		{name: "methods without a key requirement pass through", steps: []step{
			{name: "GET without a key", req: request{method: http.MethodGet}, status: http.StatusCreated, runs: 1},
			{name: "GET again runs again", req: request{method: http.MethodGet}, status: http.StatusCreated, runs: 2},
			{name: "PATCH needs one", req: request{method: http.MethodPatch, body: `{}`}, status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey, runs: 2},
		}},
		{name: "in progress", steps: []step{
			{name: "first, held", req: with(post("k1", `{"a":1}`), func(r *request) { r.header = header(hdrHold, "1") }), hold: true, status: http.StatusCreated},
			{name: "duplicate while it runs", req: post("k1", `{"a":1}`), status: http.StatusConflict, problem: nethttp.ProblemInProgress, runs: 1,
				check: func(t *testing.T, got, _ response) { assert.Equal(t, "1", got.header.Get("Retry-After")) }},
			{name: "other body while it runs", req: post("k1", `{"a":2}`), status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch, runs: 1},
		}},
		{name: "same key, another request", steps: []step{
			{name: "first", req: request{path: "/payments", query: "currency=EUR", key: "k1", body: `{"amount":100}`}, status: http.StatusCreated, runs: 1},
			mismatch("other method", request{method: http.MethodPatch, path: "/payments", query: "currency=EUR", key: "k1", body: `{"amount":100}`}),
			mismatch("other path", request{path: "/refunds", query: "currency=EUR", key: "k1", body: `{"amount":100}`}),
			mismatch("other query", request{path: "/payments", query: "currency=USD", key: "k1", body: `{"amount":100}`}),
			mismatch("no query", request{path: "/payments", key: "k1", body: `{"amount":100}`}),
			mismatch("other body", request{path: "/payments", query: "currency=EUR", key: "k1", body: `{"amount":101}`}),
			mismatch("other number spelling", request{path: "/payments", query: "currency=EUR", key: "k1", body: `{"amount":100.0}`}),
		}},
		{name: "JSON compared canonically, queries sorted", steps: []step{
			{name: "first", req: request{query: "a=1&b=2", key: "k1", body: `{"amount":100,"currency":"EUR","tags":["x","y"]}`}, status: http.StatusCreated, runs: 1},
			{name: "keys reordered, white space", req: request{query: "b=2&a=1", key: "k1", body: "{ \"tags\": [\"x\", \"y\"],\n \"currency\": \"EUR\", \"amount\": 100 }"},
				status: http.StatusCreated, replayed: true, runs: 1, check: sameBody},
			mismatch("array order counts", request{query: "a=1&b=2", key: "k1", body: `{"amount":100,"currency":"EUR","tags":["y","x"]}`}),
		}},
		{name: "bodies that are not JSON compared byte for byte", steps: []step{
			{name: "first", req: request{ctype: "text/plain", key: "k1", body: "a b"}, status: http.StatusCreated, runs: 1},
			{name: "same bytes", req: request{ctype: "text/plain", key: "k1", body: "a b"}, status: http.StatusCreated, replayed: true, runs: 1},
			mismatch("other white space", request{ctype: "text/plain", key: "k1", body: "a  b"}),
		}},
		{name: "invalid JSON refused", steps: []step{
			{name: "not JSON", req: post("k1", `{"amount":`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidJSON},
			{name: "duplicate member", req: post("k2", `{"amount":1,"amount":2}`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidJSON},
		}},
		{name: "4xx stored", steps: []step{
			{name: "first", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrStatus, "404") }), status: http.StatusNotFound, runs: 1},
			{name: "retry replayed", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrStatus, "404") }), status: http.StatusNotFound, replayed: true, runs: 1, check: sameBody},
		}},
		{name: "5xx not stored", steps: []step{
			{name: "first", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrStatus, "502") }), status: http.StatusBadGateway, runs: 1},
			{name: "retry runs again", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrStatus, "502") }), status: http.StatusBadGateway, runs: 2},
			{name: "and may succeed", req: post("k1", `{}`), status: http.StatusCreated, runs: 3},
			{name: "which is stored", req: post("k1", `{}`), status: http.StatusCreated, replayed: true, runs: 3},
		}},
		transient(http.StatusRequestTimeout),
		transient(http.StatusConflict),
		transient(http.StatusTooEarly),
		transient(http.StatusTooManyRequests),
		{name: "handler failure released", steps: []step{
			{name: "first fails", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrFail, "1") }), status: http.StatusInternalServerError, problem: nethttp.ProblemInternal, runs: 1},
			{name: "retry runs again", req: post("k1", `{}`), status: http.StatusCreated, runs: 2},
		}},
		{name: "replays leave out hop-by-hop headers, Date and cookies", steps: []step{
			{name: "first", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrExtra, "1") }), status: http.StatusCreated, runs: 1,
				check: func(t *testing.T, got, _ response) {
					assert.Equal(t, "session=secret; HttpOnly", got.header.Get("Set-Cookie"), "the first caller gets its cookie")
				}},
			{name: "retry", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrExtra, "1") }), status: http.StatusCreated, replayed: true, runs: 1,
				check: func(t *testing.T, got, first response) {
					sameBody(t, got, first)
					assert.NotEqual(t, staleDate, got.header.Get("Date"), "Date is not stored")
					for _, h := range []string{"Set-Cookie", "Keep-Alive", "X-Hop", "Proxy-Authenticate"} {
						assert.Empty(t, got.header.Values(h), h)
					}
				}},
		}},
		{name: "a record lives until its expiry", steps: []step{
			{name: "first", req: post("k1", `{}`), status: http.StatusCreated, runs: 1},
			{name: "just before expiry", advance: time.Hour - time.Second, req: post("k1", `{}`), status: http.StatusCreated, replayed: true, runs: 1},
			{name: "past it", advance: 2 * time.Second, req: post("k1", `{}`), status: http.StatusCreated, runs: 2},
		}},
	}
	return cases
}

// testClock is the engines' clock: the test moves it, nothing sleeps.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestConformance runs every case on every front door.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range conformanceCases() {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					runCase(t, d, c)
				})
			}
		})
	}
}

func runCase(t *testing.T, d driver, c conformanceCase) {
	clock := &testClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	h := &conformanceHandler{started: make(chan struct{}), release: make(chan struct{})}
	send := d.start(t, idempotent.NewMemoryStore(), h.serve,
		idempotent.WithClock(clock.Now), idempotent.WithExpiry(time.Hour), idempotent.WithPrefix("conformance"))

	var first response // the first answer of the case, for replays to match
	type held struct {
		s    step
		done chan response
	}
	var holds []held
	for i, s := range c.steps {
		clock.advance(s.advance)
		if s.hold {
			hd := held{s: s, done: make(chan response, 1)}
			go func() { hd.done <- send(s.req) }()
			<-h.started // the handler runs now, and waits
			holds = append(holds, hd)
			continue
		}
		got := send(s.req)
		if i == 0 {
			first = got
		}
		checkStep(t, s, got, first)
		assert.Equal(t, s.runs, int(h.runs.Load()), "step %q: handler runs", s.name)
	}
	close(h.release)
	for _, hd := range holds {
		checkStep(t, hd.s, <-hd.done, first)
	}
}

func checkStep(t *testing.T, s step, got, first response) {
	t.Helper()
	require.Equal(t, s.status, got.status, "step %q: status (body %s)", s.name, got.body)
	assert.Equal(t, s.replayed, got.header.Get(nethttp.HeaderReplayed) == "true", "step %q: Idempotent-Replayed", s.name)
	if s.problem != "" {
		assert.Equal(t, nethttp.ContentTypeProblem, got.header.Get("Content-Type"), "step %q", s.name)
		assert.Equal(t, "no-store", got.header.Get("Cache-Control"), "step %q", s.name)
		var p struct {
			Type   string `json:"type"`
			Title  string `json:"title"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		require.NoError(t, json.Unmarshal([]byte(got.body), &p), "step %q: %s", s.name, got.body)
		assert.Equal(t, s.problem, p.Type, "step %q", s.name)
		assert.Equal(t, s.status, p.Status, "step %q", s.name)
		assert.NotEmpty(t, p.Title, "step %q", s.name)
		assert.NotEmpty(t, p.Detail, "step %q", s.name)
	} else {
		assert.NotEqual(t, nethttp.ContentTypeProblem, got.header.Get("Content-Type"), "step %q: the handler's own answer", s.name)
	}
	if s.status != http.StatusConflict && s.status != http.StatusServiceUnavailable {
		assert.Empty(t, got.header.Get("Retry-After"), "step %q", s.name)
	}
	if s.check != nil {
		s.check(t, got, first)
	}
}
