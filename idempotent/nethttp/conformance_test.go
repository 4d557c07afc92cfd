package nethttp_test

// One table of cases for both HTTP front doors: the API Gateway adapter
// (events in, events out, payload 1.0 and 2.0) and the net/http middleware
// (a real server on 127.0.0.1). Each door is reached through a small driver
// that speaks a neutral request and response, so a rule that differs between
// them fails here, whatever their own tests say.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
	noType bool   // send no Content-Type
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
// typed API Gateway handler return an error, the http.Handler behind the API
// Gateway door call nethttp.Fail, and the net/http handler panic.
type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

// setup is what a case gives its front door: the store, the middleware's
// options and the core's.
type setup struct {
	store storage.StepStore
	http  []nethttp.Option
	core  []idempotent.Option
}

// driver starts one front door as set up, in front of handler, and returns
// the client's side of it.
type driver struct {
	name   string
	events bool // an API Gateway door: events in, events out
	start  func(t *testing.T, s setup, handler func(context.Context, request) reply) func(request) response
}

var drivers = []driver{
	{name: "apigateway v1", events: true, start: startV1},
	{name: "apigateway v2", events: true, start: startV2},
	{name: "apigateway v1 http.Handler", events: true, start: startHandlerV1},
	{name: "apigateway v2 http.Handler", events: true, start: startHandlerV2},
	{name: "nethttp", start: startNetHTTP},
}

func (r request) withDefaults() request {
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/payments"
	}
	if r.ctype == "" && !r.noType {
		r.ctype = "application/json"
	}
	return r
}

// headers returns the request's headers as a client sends them.
func (r request) headers() http.Header {
	h := http.Header{}
	if !r.noType {
		h.Set("Content-Type", r.ctype)
	}
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
func conformanceEngine(s setup) *idempotent.Engine {
	return idempotent.New(s.store, append([]idempotent.Option{idempotent.WithLogger(testlog.Logger(io.Discard))}, s.core...)...)
}

// eventV1 is r as API Gateway sends it to a REST API (payload 1.0).
func eventV1(t *testing.T, r request) lambdaevents.APIGatewayProxyRequest {
	r = r.withDefaults()
	query, err := url.ParseQuery(r.query)
	require.NoError(t, err)
	ev := lambdaevents.APIGatewayProxyRequest{HTTPMethod: r.method, Path: r.path, MultiValueHeaders: r.headers(), Body: r.body}
	if len(query) > 0 {
		ev.MultiValueQueryStringParameters = query
	}
	return ev
}

// eventV2 is r as API Gateway sends it to an HTTP API (payload 2.0).
func eventV2(r request) lambdaevents.APIGatewayV2HTTPRequest {
	r = r.withDefaults()
	ev := lambdaevents.APIGatewayV2HTTPRequest{RawPath: r.path, RawQueryString: r.query, Headers: map[string]string{}, Body: r.body}
	for k, v := range r.headers() {
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ",") // as API Gateway sends them
	}
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = r.method, r.path
	return ev
}

// fromEvent is an event response as its client receives it.
func fromEvent(status int, single map[string]string, multi map[string][]string, cookies []string, body string) response {
	header := http.Header{}
	for k, v := range single {
		header.Set(k, v)
	}
	for k, vs := range multi {
		header.Del(k)
		for _, v := range vs {
			header.Add(k, v)
		}
	}
	for _, c := range cookies {
		header.Add("Set-Cookie", c)
	}
	return response{status: status, header: header, body: body}
}

func startV1(t *testing.T, s setup, handler func(context.Context, request) reply) func(request) response {
	t.Helper()
	h := apigateway.WrapV1(conformanceEngine(s), func(ctx context.Context, ev lambdaevents.APIGatewayProxyRequest) (lambdaevents.APIGatewayProxyResponse, error) {
		in := request{method: ev.HTTPMethod, path: ev.Path, body: ev.Body, header: map[string]string{}}
		for k, v := range ev.MultiValueHeaders {
			in.header[k] = strings.Join(v, ",")
		}
		out := handler(ctx, in)
		return lambdaevents.APIGatewayProxyResponse{StatusCode: out.status, MultiValueHeaders: out.header, Body: out.body}, out.err
	}, apigateway.WithHTTPOptions(s.http...))
	return func(r request) response {
		out, err := h(t.Context(), eventV1(t, r))
		require.NoError(t, err, "the adapter never returns an error")
		return fromEvent(out.StatusCode, out.Headers, out.MultiValueHeaders, nil, out.Body)
	}
}

func startV2(t *testing.T, s setup, handler func(context.Context, request) reply) func(request) response {
	t.Helper()
	h := apigateway.WrapV2(conformanceEngine(s), func(ctx context.Context, ev lambdaevents.APIGatewayV2HTTPRequest) (lambdaevents.APIGatewayV2HTTPResponse, error) {
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
	}, apigateway.WithHTTPOptions(s.http...))
	return func(r request) response {
		out, err := h(t.Context(), eventV2(r))
		require.NoError(t, err, "the adapter never returns an error")
		return fromEvent(out.StatusCode, out.Headers, out.MultiValueHeaders, out.Cookies, out.Body)
	}
}

// httpHandler is handler as an http.Handler; a failing handler calls
// nethttp.Fail, or with panics, panics.
func httpHandler(t *testing.T, handler func(context.Context, request) reply, panics bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		in := request{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, body: string(body), header: map[string]string{}}
		for k, v := range r.Header {
			in.header[k] = strings.Join(v, ",")
		}
		out := handler(r.Context(), in)
		if out.err != nil {
			if panics {
				panic(out.err) // the net/http way of failing
			}
			nethttp.Fail(w, out.err)
			return
		}
		for k, v := range out.header {
			w.Header()[k] = v
		}
		w.WriteHeader(out.status)
		_, _ = io.WriteString(w, out.body)
	})
}

// startHandlerV1 is the API Gateway door (payload 1.0) around an
// http.Handler, with nethttp.Middleware around the handler and no
// WithScope: the door scopes keys to the caller.
func startHandlerV1(t *testing.T, s setup, handler func(context.Context, request) reply) func(request) response {
	t.Helper()
	h := apigateway.HandlerV1(nethttp.Middleware(conformanceEngine(s), s.http...)(httpHandler(t, handler, false)))
	return func(r request) response {
		out, err := h(t.Context(), eventV1(t, r))
		require.NoError(t, err, "the door never returns an error")
		return fromEvent(out.StatusCode, out.Headers, out.MultiValueHeaders, nil, out.Body)
	}
}

// startHandlerV2 is startHandlerV1 for payload 2.0.
func startHandlerV2(t *testing.T, s setup, handler func(context.Context, request) reply) func(request) response {
	t.Helper()
	h := apigateway.HandlerV2(nethttp.Middleware(conformanceEngine(s), s.http...)(httpHandler(t, handler, false)))
	return func(r request) response {
		out, err := h(t.Context(), eventV2(r))
		require.NoError(t, err, "the door never returns an error")
		return fromEvent(out.StatusCode, out.Headers, out.MultiValueHeaders, out.Cookies, out.Body)
	}
}

func startNetHTTP(t *testing.T, s setup, handler func(context.Context, request) reply) func(request) response {
	t.Helper()
	srv := httptest.NewServer(nethttp.Middleware(conformanceEngine(s), s.http...)(httpHandler(t, handler, true)))
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
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

// faultStore puts faults in front of a store; nil functions delegate.
type faultStore struct {
	storage.StepStore
	claim    func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error)
	complete func(ctx context.Context, rec storage.Record) error
}

func (s *faultStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if s.claim != nil {
		return s.claim(ctx, rec, now)
	}
	return s.StepStore.Claim(ctx, rec, now)
}

func (s *faultStore) Complete(ctx context.Context, rec storage.Record) error {
	if s.complete != nil {
		return s.complete(ctx, rec)
	}
	return s.StepStore.Complete(ctx, rec)
}

// Instructions to conformanceHandler, in request headers (which no front
// door fingerprints).
const (
	hdrStatus = "X-Test-Status" // answer with this status (default 201)
	hdrFail   = "X-Test-Fail"   // fail: an error, nethttp.Fail, or a panic (net/http)
	hdrHold   = "X-Test-Hold"   // wait for the case to release the request
	hdrExtra  = "X-Test-Extra"  // add headers the record must leave out
	hdrBig    = "X-Test-Big"    // answer with a body of 8 KiB past compression, its SHA-256 in this header
	hdrStep   = "X-Test-Step"   // run a "charge" step; the first such request answers 503 after it
)

// A fixed Date far in the past: a replay must not carry it.
const staleDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// conformanceHandler answers every request the same way on every front
// door: JSON that numbers its runs, echoes the body and carries the
// downstream key, with a Location and a custom header to be replayed.
type conformanceHandler struct {
	runs             atomic.Int32
	started, release chan struct{}
	big              string // hdrBig's body
	charges, steps   atomic.Int32
}

func (h *conformanceHandler) serve(ctx context.Context, r request) reply {
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
		return reply{err: errors.New("card declined: password=hunter2")}
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
	if get(hdrBig) != "" {
		sum := sha256.Sum256([]byte(h.big))
		header.Set(hdrBig, hex.EncodeToString(sum[:]))
		return reply{status: status, header: header, body: h.big}
	}
	out := map[string]any{"run": n, "body": r.body, "downstream": idempotent.DownstreamKey(ctx)}
	if get(hdrStep) != "" {
		id, err := idempotent.Step(ctx, "charge", func(context.Context) (string, error) {
			h.charges.Add(1)
			return "ch_1", nil
		})
		if err != nil {
			return reply{err: err}
		}
		out["charge"], out["charges"] = id, h.charges.Load()
		if h.steps.Add(1) == 1 {
			status = http.StatusServiceUnavailable
		}
	}
	body, _ := json.Marshal(out)
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
	twin bool // sent to the case's twin door (see conformanceCase.twin)

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
	after []step // once the held steps are answered

	http  []nethttp.Option    // the middleware's options
	core  []idempotent.Option // the core's, after the case's clock, expiry and prefix
	store func(storage.StepStore) storage.StepStore
	// twin is the prefix of a second door of the same kind over the same
	// store and handler, for steps marked twin.
	twin string
	// outcomes checks what the outcome hook saw.
	outcomes func(t *testing.T, seen []idempotent.Event)
	// eventsOnly, when set, says why the case runs on the API Gateway doors
	// only.
	eventsOnly string
}

// problemDetail is the detail of a problem answer.
func problemDetail(t *testing.T, got response) string {
	t.Helper()
	var p struct{ Detail string }
	require.NoError(t, json.Unmarshal([]byte(got.body), &p), got.body)
	return p.Detail
}

// bodyField is a field of the JSON that conformanceHandler answered.
func bodyField(t *testing.T, got response, name string) any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(got.body), &m), got.body)
	return m[name]
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
	noLeak := func(t *testing.T, got, _ response) {
		t.Helper()
		assert.NotContains(t, got.body, `"run"`, "a mismatch never shows the first response")
	}
	mismatch := func(name string, r request) step {
		return step{name: name, req: r, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch, runs: 1, check: noLeak}
	}
	// detailLacks checks that a problem's detail does not quote s.
	detailLacks := func(s string) func(t *testing.T, got, _ response) {
		return func(t *testing.T, got, _ response) {
			t.Helper()
			assert.NotContains(t, problemDetail(t, got), s, "the detail never quotes the request")
		}
	}
	stored := func(status int) conformanceCase {
		r := with(post("k-"+strconv.Itoa(status), `{}`), func(r *request) { r.header = header(hdrStatus, strconv.Itoa(status)) })
		return conformanceCase{name: fmt.Sprintf("%d stored", status), steps: []step{
			{name: "first", req: r, status: status, runs: 1},
			{name: "retry replayed", req: r, status: status, replayed: true, runs: 1, check: sameBody},
		}}
	}
	inProgress := func(name string, opts []nethttp.Option, retryAfter string) conformanceCase {
		return conformanceCase{name: "in progress, " + name, http: opts, steps: []step{
			{name: "first, held", req: with(post("k1", `{"a":1}`), func(r *request) { r.header = header(hdrHold, "1") }), hold: true, status: http.StatusCreated},
			{name: "duplicate while it runs", req: post("k1", `{"a":1}`), status: http.StatusConflict, problem: nethttp.ProblemInProgress, runs: 1,
				check: func(t *testing.T, got, _ response) { assert.Equal(t, retryAfter, got.header.Get("Retry-After")) }},
			mismatch("other body while it runs", post("k1", `{"a":2}`)),
		}, after: []step{
			{name: "after it ran, replayed", req: post("k1", `{"a":1}`), status: http.StatusCreated, replayed: true, runs: 1, check: sameBody},
		}}
	}
	// methods checks which methods need a key: each of keyed is idempotent,
	// each of through runs every time, with or without a key.
	methods := func(name string, opts []nethttp.Option, keyed, through []string) conformanceCase {
		c := conformanceCase{name: "methods, " + name, http: opts}
		runs := 0
		for _, m := range keyed {
			r := request{method: m, key: "k-" + m, body: `{}`}
			runs++
			c.steps = append(c.steps,
				step{name: m + " first", req: r, status: http.StatusCreated, runs: runs},
				step{name: m + " retry", req: r, status: http.StatusCreated, replayed: true, runs: runs},
				step{name: m + " without a key", req: request{method: m, body: `{}`}, status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey, runs: runs})
		}
		for _, m := range through {
			r := request{method: m, key: "k-" + m, body: `{}`}
			c.steps = append(c.steps,
				step{name: m + " with a key", req: r, status: http.StatusCreated, runs: runs + 1},
				step{name: m + " again runs again", req: r, status: http.StatusCreated, runs: runs + 2},
				step{name: m + " without a key", req: request{method: m, body: `{}`}, status: http.StatusCreated, runs: runs + 3})
			runs += 3
		}
		return c
	}
	// pairs is one case of request pairs, each under its own key: the
	// second of a pair is replayed, or refused as a mismatch.
	type pair struct {
		name        string
		first, then request
		replay      bool
	}
	pairs := func(name string, ps []pair) conformanceCase {
		c := conformanceCase{name: name}
		for i, p := range ps {
			key := "k-" + strconv.Itoa(i)
			p.first.key, p.then.key = key, key
			c.steps = append(c.steps, step{name: p.name + ", first", req: p.first, status: http.StatusCreated, runs: i + 1})
			if p.replay {
				c.steps = append(c.steps, step{name: p.name, req: p.then, status: http.StatusCreated, replayed: true, runs: i + 1})
			} else {
				c.steps = append(c.steps, step{name: p.name, req: p.then, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch, runs: i + 1, check: noLeak})
			}
		}
		return c
	}
	sameKey := func(name string, ps [][2]string) conformanceCase {
		c := conformanceCase{name: name}
		for i, p := range ps {
			c.steps = append(c.steps,
				step{name: p[0], req: post(p[0], `{}`), status: http.StatusCreated, runs: i + 1},
				step{name: p[1] + " is the same key", req: post(p[1], `{}`), status: http.StatusCreated, replayed: true, runs: i + 1})
		}
		return c
	}
	invalidKeys := func(name, why string, keys ...string) conformanceCase {
		c := conformanceCase{name: name, eventsOnly: why}
		for _, k := range keys {
			s := step{name: fmt.Sprintf("%q", k), req: post(k, `{}`), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey}
			if k == "" {
				s.req.header = header(nethttp.HeaderIdempotencyKey, "") // sent, and empty
			}
			if len(k) > 3 {
				s.check = detailLacks(k)
			}
			c.steps = append(c.steps, s)
		}
		return c
	}
	invalidJSON := func(name, ctype, body string) step {
		return step{name: name, req: request{key: "k-" + strings.ReplaceAll(name, " ", "-"), ctype: ctype, body: body}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidJSON,
			check: detailLacks(`"a"`)}
	}
	faults := func(claim func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error), complete func(context.Context, storage.Record) error) func(storage.StepStore) storage.StepStore {
		return func(mem storage.StepStore) storage.StepStore {
			return &faultStore{StepStore: mem, claim: claim, complete: complete}
		}
	}
	corrupt := func(name string, claim func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error)) conformanceCase {
		return conformanceCase{name: "corrupt record, " + name, store: faults(claim, nil), steps: []step{
			{name: "refused", req: post("k1", `{}`), status: http.StatusInternalServerError, problem: nethttp.ProblemCorruptRecord},
		}}
	}
	downstream := func(t *testing.T, got, first response) {
		t.Helper()
		assert.NotEmpty(t, bodyField(t, first, "downstream"))
		assert.Equal(t, bodyField(t, first, "downstream"), bodyField(t, got, "downstream"), "retries share the downstream key")
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

		// Statuses stored and not.
		stored(http.StatusOK), stored(http.StatusAccepted), stored(http.StatusSeeOther), stored(http.StatusBadRequest),
		stored(http.StatusPaymentRequired), stored(http.StatusUnprocessableEntity),
		transient(http.StatusInternalServerError), transient(http.StatusServiceUnavailable), transient(http.StatusGatewayTimeout),

		// Which methods need a key.
		methods("default", nil, []string{"POST", "PATCH"}, []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}),
		methods("WithMethods", []nethttp.Option{nethttp.WithMethods("put", "DELETE", "Post")}, []string{"PUT", "DELETE", "POST"}, []string{"GET", "PATCH"}),

		// Keys: required, optional, their syntax.
		{name: "missing key, every way", steps: []step{
			{name: "a Content-Type only", req: request{body: `{}`}, status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey},
			{name: "another header", req: request{body: `{}`, header: header("X-Idempotency-Key", "k")}, status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey},
		}},
		{name: "optional key", core: []idempotent.Option{idempotent.WithOptionalKey()}, steps: []step{
			{name: "without a key, runs", req: request{body: `{}`}, status: http.StatusCreated, runs: 1},
			{name: "and runs again", req: request{body: `{}`}, status: http.StatusCreated, runs: 2},
			{name: "with a key", req: post("k", `{}`), status: http.StatusCreated, runs: 3},
			{name: "still idempotent", req: post("k", `{}`), status: http.StatusCreated, replayed: true, runs: 3},
			{name: "a bad key still refused", req: request{body: `{}`, header: header(nethttp.HeaderIdempotencyKey, "")}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey, runs: 3},
		}},
		invalidKeys("invalid keys", "", "", "   ", `"`+strings.Repeat("k", nethttp.MaxKeyLength+1)+`"`, `""`, "a b", `"abc`, `"a\x"`, `"abc\`,
			`"abc"d`, `"abc";p=1`, `"a", "b"`, `"clé"`, "\"a\tb\""),
		invalidKeys("invalid keys with control bytes", "net/http's client refuses to send them", "ab\x01c", "ab\x7f"),
		sameKey("key forms", [][2]string{
			{"abc-123", `"abc-123"`}, {`"a\"b\\c"`, `a"b\c`}, {`"a b,c"`, `"a b,c"`}, {" \tabc ", "abc"},
			{strings.Repeat("k", nethttp.MaxKeyLength), `"` + strings.Repeat("k", nethttp.MaxKeyLength) + `"`},
		}),
		{name: "distinct keys", steps: []step{
			{name: "abc", req: post("abc", `{}`), status: http.StatusCreated, runs: 1},
			{name: "quoted with a space", req: post(`"abc "`, `{}`), status: http.StatusCreated, runs: 2},
			{name: "another case", req: post("abC", `{}`), status: http.StatusCreated, runs: 3},
			{name: "quoted comma", req: post(`"a,b"`, `{}`), status: http.StatusCreated, runs: 4},
		}},

		// What a duplicate must repeat.
		pairs("fingerprints", []pair{
			{name: "JSON escapes", first: request{body: `{"s":"\u00e9\/"}`}, then: request{body: `{"s":"é/"}`}, replay: true},
			{name: "numbers beyond 2^53", first: request{body: `{"n":9007199254740993}`}, then: request{body: `{"n":9007199254740992}`}},
			{name: "JSON with charset", first: request{ctype: "application/json; charset=utf-8", body: `{"a":1,"b":2}`}, then: request{ctype: "Application/JSON", body: `{"b":2,"a":1}`}, replay: true},
			{name: "+json type", first: request{ctype: "application/vnd.api+json", body: `{"a":1,"b":2}`}, then: request{ctype: "application/vnd.api+json", body: `{"b":2, "a":1}`}, replay: true},
			{name: "JSON versus text of the same bytes", first: request{body: `{"a":1}`}, then: request{ctype: "text/plain", body: `{"a":1}`}},
			{name: "no type compared byte for byte", first: request{noType: true, body: `{"a":1}`}, then: request{noType: true, body: `{"a":1}`}, replay: true},
			{name: "no type, other white space", first: request{noType: true, body: `{"a":1}`}, then: request{noType: true, body: `{"a": 1}`}},
			{name: "query added", first: request{body: `{}`}, then: request{query: "a=1", body: `{}`}},
			{name: "query order", first: request{query: "b=2&a=1&a=3", body: `{}`}, then: request{query: "a=1&b=2&a=3", body: `{}`}, replay: true},
			{name: "query value order", first: request{query: "a=1&a=3", body: `{}`}, then: request{query: "a=3&a=1", body: `{}`}},
			{name: "empty body", first: request{}, then: request{}, replay: true},
			{name: "empty versus empty object", first: request{}, then: request{body: `{}`}},
		}),
		{name: "invalid JSON, every way", steps: []step{
			invalidJSON("invalid", "application/json", `{"a":`),
			invalidJSON("duplicate key", "application/json", `{"a":1,"a":2}`),
			invalidJSON("nested duplicate key", "application/merge-patch+json", `{"x":{"a":1,"a":1}}`),
			invalidJSON("trailing data", "application/json", `{} {}`),
			invalidJSON("white space only", "application/json", " "),
			invalidJSON("invalid UTF-8", "application/json", "\"\xff\""),
			{name: "nested too deeply", req: post("k-deep", strings.Repeat("[", 600)+strings.Repeat("]", 600)), status: http.StatusBadRequest, problem: nethttp.ProblemInvalidJSON,
				check: func(t *testing.T, got, _ response) { assert.Contains(t, problemDetail(t, got), "nested too deeply") }},
			{name: "not JSON, not claimed", req: request{key: "k-text", ctype: "text/plain", body: `{"a":`}, status: http.StatusCreated, runs: 1},
			{name: "duplicate key, not claimed", req: request{key: "k-csv", ctype: "text/csv", body: `{"a":1,"a":2}`}, status: http.StatusCreated, runs: 2},
		}},

		// Retry-After.
		inProgress("WithRetryAfter rounds up", []nethttp.Option{nethttp.WithRetryAfter(2500 * time.Millisecond)}, "3"),
		inProgress("WithRetryAfter at least a second", []nethttp.Option{nethttp.WithRetryAfter(0)}, "1"),

		// The handler's failure and the store's.
		{name: "handler failure tells nothing", steps: []step{
			{name: "fails", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrFail, "1") }), status: http.StatusInternalServerError, problem: nethttp.ProblemInternal, runs: 1,
				check: func(t *testing.T, got, _ response) {
					assert.NotContains(t, got.body, "hunter2", "no internal details reach the client")
				}},
			{name: "retry runs", req: post("k1", `{}`), status: http.StatusCreated, runs: 2},
			{name: "then is replayed", req: post("k1", `{}`), status: http.StatusCreated, replayed: true, runs: 2},
		}},
		{name: "store unavailable", http: []nethttp.Option{nethttp.WithRetryAfter(5 * time.Second)},
			store: faults(func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
				return storage.ClaimResult{}, errors.New("ProvisionedThroughputExceededException")
			}, nil),
			steps: []step{{name: "refused", req: post("k1", `{}`), status: http.StatusServiceUnavailable, problem: nethttp.ProblemStoreUnavailable,
				check: func(t *testing.T, got, first response) {
					assert.Equal(t, "5", got.header.Get("Retry-After"))
					detailLacks("Provisioned")(t, got, first)
				}}}},
		{name: "store panics", eventsOnly: "net/http's server recovers the panic itself, and aborts the response",
			store: faults(func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
				panic("nil map in a store")
			}, nil), steps: []step{
				{name: "refused", req: post("k1", `{}`), status: http.StatusInternalServerError, problem: nethttp.ProblemInternal},
			}},
		{name: "complete fails", store: faults(nil, func(context.Context, storage.Record) error { return errors.New("unavailable") }), steps: []step{
			{name: "the client gets the response", req: post("k1", `{}`), status: http.StatusCreated, runs: 1,
				check: func(t *testing.T, got, _ response) { assert.Equal(t, 1.0, bodyField(t, got, "run")) }},
		}},
		{name: "response too large for the store", store: func(mem storage.StepStore) storage.StepStore {
			return &faultStore{StepStore: mem, complete: func(ctx context.Context, rec storage.Record) error {
				if len(rec.Data) > 4<<10 { // a store whose items hold 4 KB
					return fmt.Errorf("%w: %d bytes", storage.ErrTooLarge, len(rec.Data))
				}
				return mem.Complete(ctx, rec)
			}}
		}, steps: []step{
			{name: "first gets it whole", req: with(post("k1", `{}`), func(r *request) { r.header = header(hdrBig, "1") }), status: http.StatusCreated, runs: 1,
				check: func(t *testing.T, got, _ response) {
					sum := sha256.Sum256([]byte(got.body))
					assert.Equal(t, got.header.Get(hdrBig), hex.EncodeToString(sum[:]), "the handler's body, byte for byte")
					assert.Len(t, got.body, bigBody)
				}},
			{name: "retry", req: post("k1", `{}`), status: http.StatusConflict, problem: nethttp.ProblemResponseNotStored, runs: 1,
				check: func(t *testing.T, got, _ response) {
					assert.Empty(t, got.header.Get("Retry-After"), "retrying does not help")
				}},
		}},
		corrupt("of a newer format", func(_ context.Context, rec storage.Record, _ time.Time) (storage.ClaimResult, error) {
			rec.Version, rec.Status, rec.Data = 99, storage.StatusCompleted, []byte("p{}")
			return storage.ClaimResult{Existing: &rec}, nil
		}),
		corrupt("undecodable", func(_ context.Context, rec storage.Record, _ time.Time) (storage.ClaimResult, error) {
			rec.Status, rec.Data = storage.StatusCompleted, []byte("p{not json")
			return storage.ClaimResult{Existing: &rec}, nil
		}),
		corrupt("reported by the store", func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
			return storage.ClaimResult{}, idempotent.ErrCorruptRecord
		}),

		// The core's settings apply behind every door.
		{name: "outcome hook and local cache", core: []idempotent.Option{idempotent.WithLocalCache(10)}, steps: []step{
			{name: "first", req: post("k", `{}`), status: http.StatusCreated, runs: 1},
			{name: "retry", req: post("k", `{}`), status: http.StatusCreated, replayed: true, runs: 1},
			mismatch("other body", post("k", `{"a":1}`)),
		}, outcomes: func(t *testing.T, seen []idempotent.Event) {
			require.Len(t, seen, 3)
			assert.Equal(t, idempotent.OutcomeExecuted, seen[0].Outcome)
			assert.Equal(t, idempotent.OutcomeReplayed, seen[1].Outcome)
			assert.True(t, seen[1].FromCache, "served by the local cache")
			assert.Equal(t, idempotent.OutcomePayloadMismatch, seen[2].Outcome)
		}},
		{name: "prefixes separate engines sharing a store", twin: "refunds", steps: []step{
			{name: "first", req: post("k", `{}`), status: http.StatusCreated, runs: 1},
			{name: "the same key under another prefix runs", twin: true, req: post("k", `{}`), status: http.StatusCreated, runs: 2},
			{name: "retry under the first", req: post("k", `{}`), status: http.StatusCreated, replayed: true, runs: 2},
		}},
		{name: "retries share the downstream key", steps: []step{
			{name: "first, not stored", req: with(post("k", `{}`), func(r *request) { r.header = header(hdrStatus, "500") }), status: http.StatusInternalServerError, runs: 1},
			{name: "retry", req: with(post("k", `{}`), func(r *request) { r.header = header(hdrStatus, "500") }), status: http.StatusInternalServerError, runs: 2, check: downstream},
		}},
		{name: "steps resume after a response not stored", steps: []step{
			{name: "charged, then 503", req: with(post("pay-1", `{"amount":1500}`), func(r *request) { r.header = header(hdrStep, "1") }), status: http.StatusServiceUnavailable, runs: 1},
			{name: "retry resumes after the charge", req: with(post("pay-1", `{"amount":1500}`), func(r *request) { r.header = header(hdrStep, "1") }), status: http.StatusCreated, runs: 2,
				check: func(t *testing.T, got, _ response) {
					assert.Equal(t, "ch_1", bodyField(t, got, "charge"))
					assert.Equal(t, 1.0, bodyField(t, got, "charges"), "the charge ran once")
				}},
			{name: "then is replayed", req: post("pay-1", `{"amount":1500}`), status: http.StatusCreated, replayed: true, runs: 2},
		}},
	}
	return cases
}

// bigBody is the length of hdrBig's body.
const bigBody = 8 << 10

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
					if c.eventsOnly != "" && !d.events {
						t.Skip(c.eventsOnly)
					}
					runCase(t, d, c)
				})
			}
		})
	}
}

func runCase(t *testing.T, d driver, c conformanceCase) {
	clock := &testClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	h := &conformanceHandler{started: make(chan struct{}), release: make(chan struct{}),
		big: base64.StdEncoding.EncodeToString(randomBytes(t, bigBody*3/4))} // incompressible
	var mu sync.Mutex
	var seen []idempotent.Event
	hook := idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
	})
	var store storage.StepStore = idempotent.NewMemoryStore()
	if c.store != nil {
		store = c.store(store)
	}
	core := func(prefix string) []idempotent.Option {
		return append([]idempotent.Option{idempotent.WithClock(clock.Now), idempotent.WithExpiry(time.Hour), idempotent.WithPrefix(prefix), hook}, c.core...)
	}
	send := d.start(t, setup{store: store, http: c.http, core: core("conformance")}, h.serve)
	sendTwin := send
	if c.twin != "" {
		sendTwin = d.start(t, setup{store: store, http: c.http, core: core(c.twin)}, h.serve)
	}

	var first response // the first answer of the case, for replays to match
	type held struct {
		s    step
		done chan response
	}
	var holds []held
	run := func(i int, s step) {
		clock.advance(s.advance)
		to := send
		if s.twin {
			to = sendTwin
		}
		if s.hold {
			hd := held{s: s, done: make(chan response, 1)}
			go func() { hd.done <- to(s.req) }()
			<-h.started // the handler runs now, and waits
			holds = append(holds, hd)
			return
		}
		got := to(s.req)
		if i == 0 {
			first = got
		}
		checkStep(t, s, got, first)
		assert.Equal(t, s.runs, int(h.runs.Load()), "step %q: handler runs", s.name)
	}
	for i, s := range c.steps {
		run(i, s)
	}
	close(h.release)
	for _, hd := range holds {
		got := <-hd.done
		checkStep(t, hd.s, got, first)
		if first.status == 0 {
			first = got
		}
	}
	for _, s := range c.after {
		run(-1, s)
	}
	if c.outcomes != nil {
		mu.Lock()
		defer mu.Unlock()
		c.outcomes(t, seen)
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
