package apigateway_test

// The typed layer of WrapV1 and WrapV2: a handler of the event itself, its
// error or panic answered with nethttp.Fail and logged, its response
// returned unchanged when it is what the door answered. The HTTP rules
// around it are nethttp's, tested once over every door in
// idempotent/nethttp/conformance_test.go.

import (
	"context"
	"errors"
	"log/slog"
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

// TestResponseUnchanged: a response that is not stored (a status never
// stored, or one no HTTP response can have, which the door answers 502)
// reaches its client as the typed handler returned it, and the retry runs
// the handler again; one that is stored is replayed as first written.
func TestResponseUnchanged(t *testing.T) {
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

// TestStorePanicsAfterTheHandlerRan: the door recovers the panic, and the
// typed handler's client gets its response.
func TestStorePanicsAfterTheHandlerRan(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			var c counter
			store := &fakeStore{StepStore: idempotent.NewMemoryStore(), complete: func(context.Context, storage.Record) error {
				panic("nil map in a store")
			}}
			out := f.wrap(t, newEngine(store), c.handle)(post("k", "{}"))
			assert.Equal(t, http.StatusOK, out.status, "the handler ran: its client gets its response")
			assert.Equal(t, `{"path":"/payments","run":1}`, out.body)
			assert.Equal(t, 1, c.count())
		})
	}
}

// TestOneLogger: the Engine's logger is the only one of WrapV1 and WrapV2:
// the core's lines and the typed layer's own (a handler failure) both go to
// it.
func TestOneLogger(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
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
	}
}

// TestHTTPOptions: WithHTTPOptions reaches the middleware inside WrapV1 and
// WrapV2 (its rules are nethttp's conformance table's), and only there.
func TestHTTPOptions(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			var c counter
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle,
				apigateway.WithHTTPOptions(nethttp.WithMethods(http.MethodPut)), apigateway.WithHTTPOptions(nethttp.WithRetryAfter(2*time.Second)))
			put := post("k", "{}")
			put.method = http.MethodPut
			call(put)
			assert.True(t, replayed(call(put)), "PUT needs a key")
			assert.False(t, replayed(call(post("k2", "{}"))), "POST no longer does")
			assert.False(t, replayed(call(post("k2", "{}"))))
			assert.Equal(t, 3, c.count())
		})
	}
}

// TestConstructorPanics: a programmer error found at start-up panics.
func TestConstructorPanics(t *testing.T) {
	t.Parallel()
	e := newEngine(idempotent.NewMemoryStore())
	typedV1 := func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{}, nil
	}
	typedV2 := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{}, nil
	}
	ok := http.NotFoundHandler()
	for want, f := range map[string]func(){
		"apigateway: WrapV1: nil Engine":  func() { apigateway.WrapV1(nil, typedV1) },
		"apigateway: WrapV2: nil Engine":  func() { apigateway.WrapV2(nil, typedV2) },
		"apigateway: WrapV1: nil handler": func() { apigateway.WrapV1(e, nil) },
		"apigateway: WrapV2: nil handler": func() { apigateway.WrapV2(e, nil) },
		"nethttp: WithMethods: no methods": func() {
			apigateway.WrapV2(e, typedV2, apigateway.WithHTTPOptions(nethttp.WithMethods()))
		},
		"apigateway: HandlerV1: nil handler": func() { apigateway.HandlerV1(nil) },
		"apigateway: HandlerV2: nil handler": func() { apigateway.HandlerV2(nil) },
		"apigateway: HandlerV1: WithHTTPOptions is for WrapV1 and WrapV2; give nethttp's options to nethttp.Middleware": func() {
			apigateway.HandlerV1(ok, apigateway.WithHTTPOptions(nethttp.WithReplayCookies()))
		},
		"apigateway: HandlerV2: WithHTTPOptions is for WrapV1 and WrapV2; give nethttp's options to nethttp.Middleware": func() {
			apigateway.HandlerV2(ok, apigateway.WithHTTPOptions())
		},
		"apigateway: WithAuthorizerCaller: empty field name": func() { apigateway.WithAuthorizerCaller("") },
	} {
		assert.PanicsWithValue(t, want, f)
	}
}

// TestDoorRecoversPanics: behind HandlerV1 and HandlerV2, a panic that
// leaves the handler (which Lambda would not recover) is answered 500
// internal-error and logged at error level, with its stack, to
// slog.Default(). Not parallel: it sets slog.Default().
func TestDoorRecoversPanics(t *testing.T) {
	var logs testlog.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(testlog.Logger(&logs))
	boom := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom: password=hunter2") })

	v1, err := apigateway.HandlerV1(boom)(t.Context(), eventV1(t, req{method: http.MethodGet}))
	require.NoError(t, err)
	requireProblem(t, fromProxy(v1.StatusCode, v1.Headers, v1.MultiValueHeaders, nil, v1.Body, v1.IsBase64Encoded), http.StatusInternalServerError, nethttp.ProblemInternal)
	v2, err := apigateway.HandlerV2(boom)(t.Context(), eventV2(t, req{method: http.MethodGet}))
	require.NoError(t, err)
	out := fromProxy(v2.StatusCode, v2.Headers, v2.MultiValueHeaders, v2.Cookies, v2.Body, v2.IsBase64Encoded)
	requireProblem(t, out, http.StatusInternalServerError, nethttp.ProblemInternal)
	assert.NotContains(t, out.body, "hunter2")

	assert.Equal(t, 2, strings.Count(logs.String(), "apigateway: recovered panic"), logs.String())
	assert.Contains(t, logs.String(), `"level":"ERROR"`)
	assert.Contains(t, logs.String(), "apigateway_test.TestDoorRecoversPanics", "the log carries the panic's stack")
}
