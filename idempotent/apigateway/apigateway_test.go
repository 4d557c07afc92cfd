package apigateway_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/testlog"
)

func TestReplay(t *testing.T) {
	t.Parallel()
	binary := make([]byte, 64)
	_, _ = rand.Read(binary)
	tests := []struct {
		name  string
		first resp
	}{
		{
			name: "JSON body with headers",
			first: resp{
				status: http.StatusCreated,
				headers: map[string]string{
					"Content-Type":       "application/json; charset=utf-8",
					"Location":           "/payments/42",
					"X-Custom":           "kept",
					"Date":               "Mon, 02 Jan 2006 15:04:05 GMT",
					"Connection":         "keep-alive, X-Hop",
					"X-Hop":              "named by Connection",
					"Keep-Alive":         "timeout=5",
					"Proxy-Authenticate": "Basic",
					"TE":                 "trailers",
					"Trailer":            "Expires",
					"Transfer-Encoding":  "chunked",
					"Upgrade":            "h2c",
					"X-Request-Id":       "volatile",
					"X-Hop2":             "named by Connection in the other map",
				},
				multi:   map[string][]string{"X-Multi": {"a", "b"}, "proxy-connection": {"close"}, "connection": {"x-hop2"}},
				cookies: []string{"session=secret; HttpOnly"},
				body:    `{"id":42,"note":"<&>"}`,
			},
		},
		{
			name:  "base64 body byte for byte",
			first: resp{status: http.StatusOK, headers: map[string]string{"Content-Type": "application/octet-stream"}, body: base64.StdEncoding.EncodeToString(binary), base64: true},
		},
		{
			name:  "empty body, no headers",
			first: resp{status: http.StatusNoContent},
		},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				runs := 0
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
					runs++
					return tt.first, nil
				}, nethttp.WithVolatileHeaders("x-request-id"))

				first := call(post("key-1", `{"amount":100}`))
				second := call(post("key-1", `{"amount":100}`))
				require.Equal(t, 1, runs, "a duplicate must not run the handler")

				// The first client gets the handler's response unchanged.
				assert.Equal(t, tt.first.status, first.status)
				assert.Equal(t, tt.first.body, first.body)
				assert.Equal(t, tt.first.base64, first.base64)
				assert.ElementsMatch(t, tt.first.cookies, first.cookies)
				assert.False(t, replayed(first))
				if tt.first.headers != nil {
					assert.Equal(t, tt.first.headers["Date"], first.headers["Date"])
				}

				// The duplicate gets it again, less what is never stored.
				assert.Equal(t, tt.first.status, second.status)
				assert.Equal(t, tt.first.body, second.body)
				assert.Equal(t, tt.first.base64, second.base64)
				assert.True(t, replayed(second))
				assert.Empty(t, second.cookies, "cookies are not replayed by default")
				for _, name := range []string{"Content-Type", "Location", "X-Custom"} {
					if v, ok := tt.first.headers[name]; ok {
						assert.Equal(t, v, second.headers[name], name)
					}
				}
				for _, name := range []string{"Date", "Connection", "X-Hop", "Keep-Alive", "Proxy-Authenticate", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "X-Request-Id", "X-Hop2"} {
					assert.NotContains(t, second.headers, name)
				}
				if tt.first.multi != nil {
					assert.Equal(t, map[string][]string{"X-Multi": {"a", "b"}}, second.multi)
				}
			})
		}
	}
}

func TestReplayCookies(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
				return resp{status: http.StatusOK, cookies: []string{"a=1", "b=2; Secure"}, body: "ok"}, nil
			}, nethttp.WithReplayCookies())
			first := call(post("k", "{}"))
			second := call(post("k", "{}"))
			assert.True(t, replayed(second))
			assert.ElementsMatch(t, []string{"a=1", "b=2; Secure"}, first.cookies)
			assert.ElementsMatch(t, first.cookies, second.cookies)
		})
	}
}

func TestStoredStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		stored bool
	}{
		{http.StatusOK, true},
		{http.StatusCreated, true},
		{http.StatusAccepted, true},
		{http.StatusNoContent, true},
		{http.StatusSeeOther, true},
		{http.StatusBadRequest, true},
		{http.StatusPaymentRequired, true},
		{http.StatusNotFound, true},
		{http.StatusUnprocessableEntity, true},
		{http.StatusRequestTimeout, false},
		{http.StatusConflict, false},
		{http.StatusTooEarly, false},
		{http.StatusTooManyRequests, false},
		{http.StatusInternalServerError, false},
		{http.StatusBadGateway, false},
		{http.StatusServiceUnavailable, false},
		{http.StatusGatewayTimeout, false},
		{0, false},
		{http.StatusContinue, false},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+http.StatusText(tt.status), func(t *testing.T) {
				t.Parallel()
				runs := 0
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
					runs++
					return resp{status: tt.status, headers: map[string]string{"X-Run": strings.Repeat("x", runs)}, body: "answer"}, nil
				})
				first := call(post("k", `{"a":1}`))
				second := call(post("k", `{"a":1}`))
				assert.Equal(t, tt.status, first.status)
				assert.Equal(t, tt.status, second.status)
				assert.Equal(t, "answer", second.body)
				assert.False(t, replayed(first))
				if tt.stored {
					assert.Equal(t, 1, runs)
					assert.True(t, replayed(second))
					assert.Equal(t, "x", second.headers["X-Run"])
				} else {
					assert.Equal(t, 2, runs, "a response that is not stored releases the key")
					assert.False(t, replayed(second))
					assert.Equal(t, map[string]string{"X-Run": "xx"}, second.headers, "returned unchanged")
				}
			})
		}
	}
}

func TestMethods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []nethttp.Option
		idempotent []string
		through    []string
	}{
		{name: "default", idempotent: []string{"POST", "PATCH"}, through: []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}},
		{name: "WithMethods", opts: []nethttp.Option{nethttp.WithMethods("put", "DELETE", "Post")}, idempotent: []string{"PUT", "DELETE", "POST"}, through: []string{"GET", "PATCH"}},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				for _, m := range tt.idempotent {
					var c counter
					call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle, tt.opts...)
					r := post("k", "{}")
					r.method = m
					call(r)
					assert.True(t, replayed(call(r)), m)
					assert.Equal(t, 1, c.count(), m)
					requireProblem(t, call(req{method: m}), http.StatusBadRequest, nethttp.ProblemMissingKey)
				}
				for _, m := range tt.through {
					var c counter
					call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle, tt.opts...)
					r := post("k", "{}")
					r.method = m
					assert.Equal(t, http.StatusOK, call(r).status, m)
					assert.False(t, replayed(call(r)), m)
					assert.Equal(t, http.StatusOK, call(req{method: m}).status, "no key needed for "+m)
					assert.Equal(t, 3, c.count(), m)
				}
			})
		}
	}
	assert.Panics(t, func() { apigateway.WrapV2(newEngine(idempotent.NewMemoryStore()), nil) })
	assert.Panics(t, func() {
		apigateway.WrapV1(newEngine(idempotent.NewMemoryStore()), nil)
	})
	assert.PanicsWithValue(t, "apigateway: WrapV1: nil Engine", func() { wrapV1(t, nil, (&counter{}).handle) })
	assert.PanicsWithValue(t, "apigateway: WrapV2: nil Engine", func() { wrapV2(t, nil, (&counter{}).handle) })
	assert.PanicsWithValue(t, "nethttp: WithMethods: no methods", func() {
		wrapV2(t, newEngine(idempotent.NewMemoryStore()), (&counter{}).handle, nethttp.WithMethods())
	})
}

func TestMissingKey(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name+"/required", func(t *testing.T) {
			t.Parallel()
			var c counter
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle)
			for _, r := range []req{
				{body: "{}"},
				{headers: map[string]string{"Content-Type": "application/json"}, body: "{}"},
				{headers: map[string]string{"X-Idempotency-Key": "k"}, body: "{}"},
			} {
				requireProblem(t, call(r), http.StatusBadRequest, nethttp.ProblemMissingKey)
			}
			assert.Zero(t, c.count())
		})
		t.Run(f.name+"/optional", func(t *testing.T) {
			t.Parallel()
			var c counter
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithOptionalKey()), c.handle)
			r := req{headers: map[string]string{"Content-Type": "application/json"}, body: "{}"}
			assert.Equal(t, http.StatusOK, call(r).status)
			second := call(r)
			assert.Equal(t, http.StatusOK, second.status)
			assert.False(t, replayed(second))
			assert.Equal(t, 2, c.count(), "without a key there is no idempotency")

			// With a key the request is still idempotent, and a bad key still refused.
			call(post("k", "{}"))
			assert.True(t, replayed(call(post("k", "{}"))))
			requireProblem(t, call(post("", "{}")), http.StatusBadRequest, nethttp.ProblemInvalidKey)
			assert.Equal(t, 3, c.count())
		})
	}
}

func TestInvalidKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, key string }{
		{"empty", ""},
		{"blank", "   "},
		{"too long", strings.Repeat("k", nethttp.MaxKeyLength+1)},
		{"too long quoted", `"` + strings.Repeat("k", nethttp.MaxKeyLength+1) + `"`},
		{"empty quoted", `""`},
		{"non-ASCII", "clé"},
		{"control character", "ab\x01c"},
		{"DEL", "ab\x7f"},
		{"space in bare key", "a b"},
		{"comma in bare key", "a,b"},
		{"unterminated quote", `"abc`},
		{"bad escape", `"a\x"`},
		{"trailing escape", `"abc\`},
		{"data after quote", `"abc"d`},
		{"parameters", `"abc";p=1`},
		{"two quoted keys", `"a", "b"`},
		{"non-ASCII quoted", `"clé"`},
		{"tab quoted", "\"a\tb\""},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var c counter
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle)
				detail := requireProblem(t, call(post(tt.key, "{}")), http.StatusBadRequest, nethttp.ProblemInvalidKey)
				assert.Zero(t, c.count())
				if len(tt.key) > 3 {
					assert.NotContains(t, detail, tt.key, "the detail never quotes the key")
				}
			})
		}
	}
}

func TestKeyForms(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", nethttp.MaxKeyLength)
	tests := []struct {
		name        string
		first, then req
	}{
		{"bare and quoted", post("abc-123", "{}"), post(`"abc-123"`, "{}")},
		{"quoted with escapes", post(`"a\"b\\c"`, "{}"), post(`a"b\c`, "{}")},
		{"quoted with space and comma", post(`"a b,c"`, "{}"), post(`"a b,c"`, "{}")},
		{"surrounding white space", post(" \tabc ", "{}"), post("abc", "{}")},
		{"longest key", post(long, "{}"), post(`"`+long+`"`, "{}")},
		{
			"header name case",
			req{headers: map[string]string{"idempotency-key": "abc", "content-type": "application/json"}, body: "{}"},
			req{headers: map[string]string{"IDEMPOTENCY-KEY": "abc", "Content-Type": "application/json"}, body: "{}"},
		},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var c counter
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle)
				assert.Equal(t, http.StatusOK, call(tt.first).status)
				second := call(tt.then)
				assert.Equal(t, http.StatusOK, second.status)
				assert.True(t, replayed(second), "the same key")
				assert.Equal(t, 1, c.count())
			})
		}
	}
	t.Run("distinct keys", func(t *testing.T) {
		t.Parallel()
		var c counter
		call := wrapV2(t, newEngine(idempotent.NewMemoryStore()), c.handle)
		for _, k := range []string{"abc", `"abc "`, "abC", `"a,b"`} {
			assert.False(t, replayed(call(post(k, "{}"))), k)
		}
		assert.Equal(t, 4, c.count())
	})
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	jsonReq := func(body string) req { return post("k", body) }
	typed := func(contentType, body string) req {
		return req{headers: map[string]string{"Idempotency-Key": "k", "Content-Type": contentType}, body: body}
	}
	with := func(r req, edit func(*req)) req { edit(&r); return r }
	tests := []struct {
		name        string
		first, then req
		replay      bool
	}{
		{"identical", jsonReq(`{"a":1,"b":[1,2]}`), jsonReq(`{"a":1,"b":[1,2]}`), true},
		{"JSON key order and white space", jsonReq(`{"a":1,"b":{"x":true,"y":null}}`), jsonReq("{ \"b\" : {\"y\":null, \"x\":true},\n\"a\":1 }"), true},
		{"JSON escapes", jsonReq(`{"s":"\u00e9\/"}`), jsonReq(`{"s":"é/"}`), true},
		{"JSON value differs", jsonReq(`{"amount":100}`), jsonReq(`{"amount":101}`), false},
		{"JSON array order", jsonReq(`[1,2]`), jsonReq(`[2,1]`), false},
		{"numbers beyond 2^53", jsonReq(`{"n":9007199254740993}`), jsonReq(`{"n":9007199254740992}`), false},
		{"numbers as written", jsonReq(`{"n":1.0}`), jsonReq(`{"n":1}`), false},
		{"JSON with charset", typed("application/json; charset=utf-8", `{"a":1,"b":2}`), typed("Application/JSON", `{"b":2,"a":1}`), true},
		{"+json type", typed("application/vnd.api+json", `{"a":1,"b":2}`), typed("application/vnd.api+json", `{"b":2, "a":1}`), true},
		{"JSON versus text of the same bytes", jsonReq(`{"a":1}`), typed("text/plain", `{"a":1}`), false},
		{"text compared byte for byte", typed("text/plain", `{"a":1}`), typed("text/plain", `{"a": 1}`), false},
		{"no type compared byte for byte", typed("", `{"a":1}`), typed("", `{"a":1}`), true},
		{"text body identical", typed("text/plain", "hello"), typed("text/plain", "hello"), true},
		{"base64 body equals plain body", jsonReq(`{"a":1}`), with(jsonReq(base64.StdEncoding.EncodeToString([]byte(`{ "a" : 1 }`))), func(r *req) { r.base64 = true }), true},
		{"base64 binary differs", with(typed("application/octet-stream", base64.StdEncoding.EncodeToString([]byte{0, 1})), func(r *req) { r.base64 = true }), with(typed("application/octet-stream", base64.StdEncoding.EncodeToString([]byte{0, 2})), func(r *req) { r.base64 = true }), false},
		{"path differs", jsonReq(`{}`), with(jsonReq(`{}`), func(r *req) { r.path = "/refunds" }), false},
		{"method differs", jsonReq(`{}`), with(jsonReq(`{}`), func(r *req) { r.method = http.MethodPatch }), false},
		{"query differs", with(jsonReq(`{}`), func(r *req) { r.query = "a=1" }), with(jsonReq(`{}`), func(r *req) { r.query = "a=2" }), false},
		{"query added", jsonReq(`{}`), with(jsonReq(`{}`), func(r *req) { r.query = "a=1" }), false},
		{"query order", with(jsonReq(`{}`), func(r *req) { r.query = "b=2&a=1&a=3" }), with(jsonReq(`{}`), func(r *req) { r.query = "a=1&b=2&a=3" }), true},
		{"query value order", with(jsonReq(`{}`), func(r *req) { r.query = "a=1&a=3" }), with(jsonReq(`{}`), func(r *req) { r.query = "a=3&a=1" }), false},
		{"empty body", jsonReq(""), jsonReq(""), true},
		{"empty versus empty object", jsonReq(""), jsonReq("{}"), false},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				runs := 0
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
					runs++
					return resp{status: http.StatusCreated, body: "first-response-secret"}, nil
				})
				require.Equal(t, http.StatusCreated, call(tt.first).status)
				second := call(tt.then)
				assert.Equal(t, 1, runs)
				if tt.replay {
					assert.Equal(t, http.StatusCreated, second.status)
					assert.True(t, replayed(second))
					return
				}
				requireProblem(t, second, http.StatusUnprocessableEntity, nethttp.ProblemPayloadMismatch)
				assert.NotContains(t, second.body, "first-response-secret", "a mismatch never leaks the first response")
			})
		}
	}
}

func TestInvalidJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body string
		status                  int
	}{
		{"invalid", "application/json", `{"a":`, http.StatusBadRequest},
		{"duplicate key", "application/json", `{"a":1,"a":2}`, http.StatusBadRequest},
		{"nested duplicate key", "application/merge-patch+json", `{"x":{"a":1,"a":1}}`, http.StatusBadRequest},
		{"trailing data", "application/json", `{} {}`, http.StatusBadRequest},
		{"white space only", "application/json", " ", http.StatusBadRequest},
		{"invalid UTF-8", "application/json", "\"\xff\"", http.StatusBadRequest},
		{"not JSON, not claimed", "text/plain", `{"a":`, http.StatusOK},
		{"duplicate key, not claimed", "text/csv", `{"a":1,"a":2}`, http.StatusOK},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var c counter
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle)
				out := call(req{headers: map[string]string{"Idempotency-Key": "k", "Content-Type": tt.contentType}, body: tt.body})
				if tt.status == http.StatusOK {
					assert.Equal(t, http.StatusOK, out.status)
					assert.Equal(t, 1, c.count())
					return
				}
				detail := requireProblem(t, out, tt.status, nethttp.ProblemInvalidJSON)
				assert.Zero(t, c.count())
				assert.NotContains(t, detail, `"a"`, "the detail never quotes the body")
			})
		}
	}
}

func TestInProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []nethttp.Option
		retryAfter string
	}{
		{name: "default Retry-After", retryAfter: "1"},
		{name: "WithRetryAfter rounds up", opts: []nethttp.Option{nethttp.WithRetryAfter(2500 * time.Millisecond)}, retryAfter: "3"},
		{name: "WithRetryAfter at least a second", opts: []nethttp.Option{nethttp.WithRetryAfter(0)}, retryAfter: "1"},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				started, release := make(chan struct{}), make(chan struct{})
				var c counter
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(ctx context.Context, r req) (resp, error) {
					close(started)
					<-release
					return c.handle(ctx, r)
				}, tt.opts...)

				done := make(chan resp)
				go func() { done <- call(post("k", `{"a":1}`)) }()
				<-started

				busy := call(post("k", `{"a":1}`))
				requireProblem(t, busy, http.StatusConflict, nethttp.ProblemInProgress)
				assert.Equal(t, tt.retryAfter, busy.headers["Retry-After"])

				// A different payload is a mismatch even while the first runs.
				requireProblem(t, call(post("k", `{"a":2}`)), http.StatusUnprocessableEntity, nethttp.ProblemPayloadMismatch)

				close(release)
				first := <-done
				assert.Equal(t, http.StatusOK, first.status)
				after := call(post("k", `{"a":1}`))
				assert.True(t, replayed(after))
				assert.Equal(t, first.body, after.body)
				assert.Equal(t, 1, c.count())
			})
		}
	}
}

func TestHandlerFailure(t *testing.T) {
	t.Parallel()
	panicValue := errors.New("password=hunter2")
	tests := []struct {
		name string
		fail func() (resp, error)
	}{
		{"error", func() (resp, error) {
			return resp{status: http.StatusOK, body: "partial"}, errors.New("db: password=hunter2 refused")
		}},
		{"panic", func() (resp, error) { panic("boom: password=hunter2") }},
		{"panic with error", func() (resp, error) { panic(panicValue) }},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var c counter
				fail := true
				var logs testlog.Buffer
				var failure error
				e := newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs)),
					idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
						if ev.Outcome == idempotent.OutcomeHandlerError {
							failure = ev.Err
						}
					}))
				call := f.wrap(t, e, func(ctx context.Context, r req) (resp, error) {
					if fail {
						fail = false
						return tt.fail()
					}
					return c.handle(ctx, r)
				})

				first := call(post("k", "{}"))
				requireProblem(t, first, http.StatusInternalServerError, nethttp.ProblemInternal)
				assert.NotContains(t, first.body, "hunter2", "no internal details reach the client")
				assert.NotContains(t, first.body, "partial")
				assert.Contains(t, logs.String(), "apigateway: handler failed")
				if strings.HasPrefix(tt.name, "panic") {
					assert.Contains(t, logs.String(), "apigateway_test.TestHandlerFailure", "the log carries the panic's own stack")
				}
				require.Error(t, failure, "the outcome hook saw the failure")
				assert.Equal(t, tt.name == "panic with error", errors.Is(failure, panicValue),
					"a panic with an error stays matchable: %v", failure)

				// The record was released: the retry runs, then is replayed.
				second := call(post("k", "{}"))
				assert.Equal(t, http.StatusOK, second.status)
				assert.False(t, replayed(second))
				assert.True(t, replayed(call(post("k", "{}"))))
				assert.Equal(t, 1, c.count())
			})
		}
	}
}

func TestPassThroughFailure(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(_ context.Context, r req) (resp, error) {
				if r.path == "/panic" {
					panic("boom")
				}
				return resp{}, errors.New("secret detail")
			})
			requireProblem(t, call(req{method: http.MethodGet, path: "/panic"}), http.StatusInternalServerError, nethttp.ProblemInternal)
			out := call(req{method: http.MethodGet})
			requireProblem(t, out, http.StatusInternalServerError, nethttp.ProblemInternal)
			assert.NotContains(t, out.body, "secret")
		})
	}
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name+"/claim fails", func(t *testing.T) {
			t.Parallel()
			var c counter
			store := &fakeStore{StepStore: idempotent.NewMemoryStore(), claim: func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
				return storage.ClaimResult{}, errors.New("ProvisionedThroughputExceededException")
			}}
			call := f.wrap(t, newEngine(store), c.handle, nethttp.WithRetryAfter(5*time.Second))
			out := call(post("k", "{}"))
			detail := requireProblem(t, out, http.StatusServiceUnavailable, nethttp.ProblemStoreUnavailable)
			assert.Equal(t, "5", out.headers["Retry-After"])
			assert.NotContains(t, detail, "Provisioned")
			assert.Zero(t, c.count())
		})
		t.Run(f.name+"/store panics", func(t *testing.T) {
			t.Parallel()
			var c counter
			store := &fakeStore{StepStore: idempotent.NewMemoryStore(), claim: func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
				panic("nil map in a store")
			}}
			call := f.wrap(t, newEngine(store), c.handle)
			requireProblem(t, call(post("k", "{}")), http.StatusInternalServerError, nethttp.ProblemInternal)
			assert.Zero(t, c.count())
		})
		t.Run(f.name+"/store panics after the handler ran", func(t *testing.T) {
			t.Parallel()
			var c counter
			store := &fakeStore{StepStore: idempotent.NewMemoryStore(), complete: func(context.Context, storage.Record) error {
				panic("nil map in a store")
			}}
			call := f.wrap(t, newEngine(store), c.handle)
			out := call(post("k", "{}"))
			assert.Equal(t, http.StatusOK, out.status, "the handler ran: its client gets its response")
			assert.Equal(t, 1, c.count())
		})
		t.Run(f.name+"/complete fails", func(t *testing.T) {
			t.Parallel()
			var c counter
			store := &fakeStore{StepStore: idempotent.NewMemoryStore(), complete: func(context.Context, storage.Record) error {
				return errors.New("unavailable")
			}}
			call := f.wrap(t, newEngine(store), c.handle)
			out := call(post("k", "{}"))
			assert.Equal(t, http.StatusOK, out.status, "the handler ran: its client gets its response")
			assert.Equal(t, `{"path":"/payments","run":1}`, out.body)
		})
	}
}

func TestResponseNotStored(t *testing.T) {
	t.Parallel()
	random := make([]byte, 8<<10)
	_, _ = rand.Read(random)
	big := base64.StdEncoding.EncodeToString(random) // incompressible
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			mem := idempotent.NewMemoryStore()
			store := &fakeStore{StepStore: mem, complete: func(ctx context.Context, rec storage.Record) error {
				if len(rec.Data) > 4<<10 { // a store whose items hold 4 KB
					return fmt.Errorf("%w: %d bytes", storage.ErrTooLarge, len(rec.Data))
				}
				return mem.Complete(ctx, rec)
			}}
			call := f.wrap(t, newEngine(store), func(context.Context, req) (resp, error) {
				runs++
				return resp{status: http.StatusOK, body: big}, nil
			})
			first := call(post("k", "{}"))
			assert.Equal(t, http.StatusOK, first.status)
			assert.Equal(t, big, first.body, "the first client always gets its response")

			second := call(post("k", "{}"))
			requireProblem(t, second, http.StatusConflict, nethttp.ProblemResponseNotStored)
			assert.NotContains(t, second.headers, "Retry-After", "retrying does not help")
			assert.Equal(t, 1, runs, "the side effect is not repeated")
		})
	}
}

func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		claim func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error)
	}{
		{"foreign version", func(_ context.Context, rec storage.Record, _ time.Time) (storage.ClaimResult, error) {
			rec.Version, rec.Status, rec.Data = 99, storage.StatusCompleted, []byte("p{}")
			return storage.ClaimResult{Existing: &rec}, nil
		}},
		{"undecodable data", func(_ context.Context, rec storage.Record, _ time.Time) (storage.ClaimResult, error) {
			rec.Status, rec.Data = storage.StatusCompleted, []byte("p{not json")
			return storage.ClaimResult{Existing: &rec}, nil
		}},
		{"store reports corruption", func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
			return storage.ClaimResult{}, idempotent.ErrCorruptRecord
		}},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var c counter
				call := f.wrap(t, newEngine(&fakeStore{StepStore: idempotent.NewMemoryStore(), claim: tt.claim}), c.handle)
				requireProblem(t, call(post("k", "{}")), http.StatusInternalServerError, nethttp.ProblemCorruptRecord)
				assert.Zero(t, c.count())
			})
		}
	}
}

func TestCallerScope(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
				runs++
				return resp{status: http.StatusCreated, body: "response " + strings.Repeat("#", runs)}, nil
			})
			as := func(sub string) req { r := post("shared-key", `{"amount":1}`); r.sub = sub; return r }

			alice := call(as("alice"))
			bob := call(as("bob"))
			anon := call(as(""))
			assert.Equal(t, 3, runs, "each caller has its own key space")
			assert.False(t, replayed(bob), "bob never sees alice's response")
			assert.False(t, replayed(anon), "an anonymous caller never sees an authenticated one's response")

			for _, tc := range []struct {
				sub  string
				want resp
			}{{"alice", alice}, {"bob", bob}, {"", anon}} {
				again := call(as(tc.sub))
				assert.True(t, replayed(again))
				assert.Equal(t, tc.want.body, again.body, tc.sub)
			}
			assert.Equal(t, 3, runs)
		})
	}
}

func TestLogsNeverHoldKeysOrBodies(t *testing.T) {
	t.Parallel()
	const key = "key-4f0c2bd1-secret"
	const marker = "body-7d1e-secret"
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			var logs testlog.Buffer
			fail := true
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))), func(_ context.Context, r req) (resp, error) {
				if strings.Contains(r.body, "fail") && fail {
					fail = false
					return resp{}, errors.New("downstream refused")
				}
				if strings.Contains(r.body, "panic") {
					panic("downstream exploded")
				}
				return resp{status: http.StatusOK, body: `{"echo":"` + marker + `"}`}, nil
			})

			body := `{"note":"` + marker + `"}`
			call(post(key, body))                                       // executed
			call(post(key, body))                                       // replayed
			call(post(key, `{"note":"`+marker+`-2"}`))                  // mismatch
			call(post(key+"\x01", body))                                // invalid key
			call(post(key+"-json", `{"n":"`+marker+`","n":1}`))         // invalid JSON
			call(post(key+"-fail", `{"fail":"`+marker+`"}`))            // handler error, released
			call(post(key+"-panic", `{"panic":"`+marker+`"}`))          // panic
			call(req{body: body, headers: map[string]string{"X": key}}) // missing key

			out := logs.String()
			require.Contains(t, out, "idempotent: executed", "the test must see the core's logs")
			require.Contains(t, out, "idempotent: replayed")
			require.Contains(t, out, "apigateway: handler failed")
			assert.NotContains(t, out, "4f0c2bd1", "a raw key was logged")
			assert.NotContains(t, out, "7d1e", "a raw body was logged")
		})
	}
}

// The core's settings are the Engine's, given once to idempotent.New; the
// adapter applies them.
func TestEngineSettings(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name+"/outcome hook and local cache", func(t *testing.T) {
			t.Parallel()
			var events []idempotent.Event
			var c counter
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(),
				idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) { events = append(events, e) }),
				idempotent.WithLocalCache(10),
			), c.handle)
			call(post("k", "{}"))
			assert.True(t, replayed(call(post("k", "{}"))))
			requireProblem(t, call(post("k", `{"a":1}`)), http.StatusUnprocessableEntity, nethttp.ProblemPayloadMismatch)
			require.Len(t, events, 3)
			assert.Equal(t, idempotent.OutcomeExecuted, events[0].Outcome)
			assert.Equal(t, idempotent.OutcomeReplayed, events[1].Outcome)
			assert.True(t, events[1].FromCache, "served by the local cache")
			assert.Equal(t, idempotent.OutcomePayloadMismatch, events[2].Outcome)
		})
		t.Run(f.name+"/prefix", func(t *testing.T) {
			t.Parallel()
			store := idempotent.NewMemoryStore()
			var a, b counter
			callA := f.wrap(t, newEngine(store, idempotent.WithPrefix("payments")), a.handle)
			callB := f.wrap(t, newEngine(store, idempotent.WithPrefix("refunds")), b.handle)
			callA(post("k", "{}"))
			assert.False(t, replayed(callB(post("k", "{}"))), "prefixes separate functions sharing a table")
			assert.True(t, replayed(callA(post("k", "{}"))))
		})
		t.Run(f.name+"/one logger", func(t *testing.T) {
			t.Parallel()
			// The Engine's logger is the only one: the core's lines and the
			// adapter's own (a handler failure) both go to it.
			var logs testlog.Buffer
			fail := true
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))),
				func(ctx context.Context, r req) (resp, error) {
					if fail {
						fail = false
						return resp{}, errors.New("downstream refused")
					}
					return (&counter{}).handle(ctx, r)
				})
			call(post("k", "{}"))
			call(post("k", "{}"))
			assert.Contains(t, logs.String(), "apigateway: handler failed")
			assert.Contains(t, logs.String(), "idempotent: executed")
		})
		t.Run(f.name+"/downstream key", func(t *testing.T) {
			t.Parallel()
			var keys []string
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(ctx context.Context, _ req) (resp, error) {
				keys = append(keys, idempotent.DownstreamKey(ctx))
				return resp{status: http.StatusInternalServerError}, nil
			})
			call(post("k", "{}"))
			call(post("k", "{}"))
			require.Len(t, keys, 2)
			assert.NotEmpty(t, keys[0])
			assert.Equal(t, keys[0], keys[1], "retries share the downstream key")
		})
	}
}

// An authorizer with simple responses passes only its context: without
// WithAuthorizerCaller its callers share one scope (warned about once);
// with it, each caller has its own, and a request whose context lacks the
// field is refused rather than put in a shared scope.
func TestAuthorizerCaller(t *testing.T) {
	t.Parallel()
	as := func(ctx map[string]any) req { r := post("shared-key", `{"amount":1}`); r.lambdaAuth = ctx; return r }
	alice, bob := map[string]any{"userId": "alice"}, map[string]any{"userId": "bob"}
	for _, f := range flavors {
		t.Run(f.name+"/without the option", func(t *testing.T) {
			t.Parallel()
			var c counter
			var logs testlog.Buffer
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))), c.handle)
			assert.False(t, replayed(call(as(alice))))
			assert.True(t, replayed(call(as(bob))), "one shared scope: the documented default the warning is about")
			assert.Equal(t, 1, strings.Count(logs.String(), "apigateway.WithAuthorizerCaller"), "warned once: %s", logs.String())
		})
		t.Run(f.name+"/with the option", func(t *testing.T) {
			t.Parallel()
			var c counter
			var logs testlog.Buffer
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))), c.handle,
				apigateway.WithAuthorizerCaller("userId"))
			first := call(as(alice))
			assert.False(t, replayed(first))
			assert.False(t, replayed(call(as(bob))), "bob never sees alice's response")
			again := call(as(alice))
			assert.True(t, replayed(again))
			assert.Equal(t, first.body, again.body)
			// A number (float64 once decoded) and a principalId that the field overrides.
			assert.False(t, replayed(call(as(map[string]any{"userId": 42.0, "principalId": "shared"}))))
			assert.True(t, replayed(call(as(map[string]any{"userId": 42.0, "principalId": "other"}))))
			assert.Equal(t, 3, c.count())
			assert.NotContains(t, logs.String(), "share one idempotency scope")

			// The kind is part of the caller: the string "42" is not the number 42.
			assert.False(t, replayed(call(as(map[string]any{"userId": "42"}))))
			// A context field named "claims" does not make it a Cognito authorizer.
			assert.False(t, replayed(call(as(map[string]any{"userId": "carol", "claims": "x", "principalId": "shared"}))))
			assert.Equal(t, 5, c.count())

			for name, ctx := range map[string]map[string]any{
				"missing": {"principalId": "p"}, "empty": {"userId": ""}, "not a scalar": {"userId": map[string]any{"id": "x"}},
				"a fraction": {"userId": 1.5}, "beyond 2^53": {"userId": 1e16},
				"exactly 2^53": {"userId": 9007199254740992.0}, // also what 2^53+1 decodes to
			} {
				r := call(as(ctx))
				requireProblem(t, r, http.StatusInternalServerError, nethttp.ProblemInternal)
				assert.Equal(t, 5, c.count(), "%s field: the handler did not run", name)
			}
			assert.Contains(t, logs.String(), `has no usable \"userId\" field`)

			// Requests authorized otherwise keep their usual scope.
			r := post("shared-key", `{"amount":1}`)
			r.sub = "alice"
			assert.False(t, replayed(call(r)))
			assert.Equal(t, 6, c.count())
		})
	}
	// HTTP API: a Lambda authorizer that passed no context at all is refused
	// too, not put in the shared anonymous scope.
	var c counter
	call := wrapV2(t, newEngine(idempotent.NewMemoryStore()), c.handle, apigateway.WithAuthorizerCaller("userId"))
	requireProblem(t, call(as(map[string]any{})), http.StatusInternalServerError, nethttp.ProblemInternal)
	assert.Zero(t, c.count())

	assert.PanicsWithValue(t, "apigateway: WithAuthorizerCaller: empty field name", func() {
		apigateway.WrapV2(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, nil
		}, apigateway.WithAuthorizerCaller(""))
	})
}

// TestReplayOfInvalidUTF8: a body or header that is not valid UTF-8 reaches
// the first client through the Lambda runtime's JSON, one U+FFFD per invalid
// byte; the duplicate gets exactly that, not an error.
func TestReplayOfInvalidUTF8(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
				runs++
				return resp{status: http.StatusOK, headers: map[string]string{"X-Name": "caf\xe9"}, body: "caf\xe9 \xff\xfe ok"}, nil
			})
			first := call(post("key-1", `{"amount":100}`))
			second := call(post("key-1", `{"amount":100}`))
			require.Equal(t, 1, runs)
			assert.Equal(t, "caf\xe9 \xff\xfe ok", first.body, "the first client gets the handler's response")
			assert.Equal(t, http.StatusOK, second.status)
			assert.True(t, replayed(second))
			assert.Equal(t, "caf\uFFFD \uFFFD\uFFFD ok", second.body, "as the runtime's JSON sent it the first time")
			assert.Equal(t, "caf\uFFFD", second.headers["X-Name"])
		})
	}
}
