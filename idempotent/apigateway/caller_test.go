package apigateway_test

// Caller scoping through every door: each authorizer kind names its own key
// space, HandlerV1 and HandlerV2 scope by default as WrapV1 and WrapV2 do,
// and WithAuthorizerCaller names a Lambda authorizer's caller by a field.

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/sampleevents"
	"github.com/idemkit/idemkit/internal/testlog"
)

func TestCallerScope(t *testing.T) {
	t.Parallel()
	for _, f := range doors {
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

// An authorizer with simple responses passes only its context: without
// WithAuthorizerCaller its callers share one scope (warned about once);
// with it, each caller has its own, and a request whose context lacks the
// field is refused rather than put in a shared scope.
func TestAuthorizerCaller(t *testing.T) {
	t.Parallel()
	as := func(ctx map[string]any) req { r := post("shared-key", `{"amount":1}`); r.lambdaAuth = ctx; return r }
	alice, bob := map[string]any{"userId": "alice"}, map[string]any{"userId": "bob"}
	for _, f := range doors {
		t.Run(f.name+"/without the option", func(t *testing.T) {
			t.Parallel()
			var c counter
			var logs testlog.Buffer
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))), c.handle)
			assert.False(t, replayed(call(as(alice))))
			assert.True(t, replayed(call(as(bob))), "one shared scope: the documented default the warning is about")
			if !strings.Contains(f.name, "http.Handler") { // HandlerV1 and HandlerV2 warn to slog.Default(): TestSharedScopeWarning
				assert.Equal(t, 1, strings.Count(logs.String(), "apigateway.WithAuthorizerCaller"), "warned once: %s", logs.String())
			}
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
	for _, wrap := range []func(t testing.TB, e *idempotent.Engine, h handler, opts ...apigateway.Option) func(req) resp{wrapV2, handlerV2} {
		var c counter
		call := wrap(t, newEngine(idempotent.NewMemoryStore()), c.handle, apigateway.WithAuthorizerCaller("userId"))
		requireProblem(t, call(as(map[string]any{})), http.StatusInternalServerError, nethttp.ProblemInternal)
		assert.Zero(t, c.count())

		// A request that needs no key runs: it needs no scope either.
		get := as(map[string]any{})
		get.method = http.MethodGet
		assert.Equal(t, http.StatusOK, call(get).status)
		assert.Equal(t, 1, c.count())
	}

	assert.PanicsWithValue(t, "apigateway: WithAuthorizerCaller: empty field name", func() {
		apigateway.WrapV2(newEngine(idempotent.NewMemoryStore()), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, nil
		}, apigateway.WithAuthorizerCaller(""))
	})
}

// TestCallerKinds: every authorizer kind names a caller of its own, through
// every door: each kind's request with one key and body runs, and its retry
// is replayed its own response. The events are events/ and testdata/ as
// API Gateway sends them, their authorizer changed.
func TestCallerKinds(t *testing.T) {
	t.Parallel()
	type iamV2 = events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
	type authzV2 = events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	v2 := map[string]func(*events.APIGatewayV2HTTPRequest){
		"JWT subject": func(*events.APIGatewayV2HTTPRequest) {},
		"another JWT subject": func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer.JWT.Claims["sub"] = "9c8d7e6f-5a4b-4c3d-8e2f-1a0b9c8d7e6f"
		},
		"JWT client credentials": func(ev *events.APIGatewayV2HTTPRequest) { delete(ev.RequestContext.Authorizer.JWT.Claims, "sub") },
		"IAM user": func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer = &authzV2{IAM: &iamV2{UserARN: "arn:aws:iam::1:user/a"}}
		},
		"IAM caller": func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer = &authzV2{IAM: &iamV2{CallerID: "AROA:s", AccountID: "1"}}
		},
		"Cognito identity": func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer = &authzV2{IAM: &iamV2{UserARN: "arn:aws:sts::1:assumed-role/R/CognitoIdentityCredentials",
				CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityID: "eu:123", IdentityPoolID: "eu:pool"}}}
		},
		"Lambda principal": func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer = &authzV2{Lambda: map[string]any{"principalId": "u-1"}}
		},
		"anonymous": func(ev *events.APIGatewayV2HTTPRequest) { ev.RequestContext.Authorizer = nil },
	}
	v1 := map[string]func(*events.APIGatewayProxyRequest){
		"Cognito user pool subject": func(*events.APIGatewayProxyRequest) {},
		"another subject": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer["claims"].(map[string]any)["sub"] = "9c8d7e6f-5a4b-4c3d-8e2f-1a0b9c8d7e6f"
		},
		"client credentials": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer["claims"] = map[string]any{"client_id": "svc", "iss": "https://idp"}
		},
		"Lambda principal": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer = map[string]any{"principalId": "u-1", "integrationLatency": 3.0}
		},
		"Cognito identity": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer = nil
			ev.RequestContext.Identity.CognitoIdentityID, ev.RequestContext.Identity.CognitoIdentityPoolID = "eu:123", "eu:pool"
		},
		"IAM user": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer, ev.RequestContext.Identity.UserArn = nil, "arn:aws:iam::1:user/a"
		},
		"IAM caller": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer, ev.RequestContext.Identity.Caller, ev.RequestContext.Identity.AccountID = nil, "AIDA", "1"
		},
		"API key": func(ev *events.APIGatewayProxyRequest) {
			ev.RequestContext.Authorizer, ev.RequestContext.Identity.APIKeyID = nil, "k1"
		},
		"anonymous": func(ev *events.APIGatewayProxyRequest) { ev.RequestContext.Authorizer = nil },
	}
	// answer numbers the handler's runs.
	answer := func(runs *int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			*runs++
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, "run %d", *runs)
		}
	}
	check := func(t *testing.T, kinds int, runs *int, send func(kind string) (int, string, bool), names []string) {
		t.Helper()
		first := map[string]string{}
		for _, kind := range names {
			status, body, replayed := send(kind)
			assert.Equal(t, http.StatusCreated, status, kind)
			assert.False(t, replayed, "%s never sees another caller's response", kind)
			first[kind] = body
		}
		assert.Equal(t, kinds, *runs, "each caller has its own key space")
		for _, kind := range names {
			_, body, replayed := send(kind)
			assert.True(t, replayed, kind)
			assert.Equal(t, first[kind], body, kind)
		}
		assert.Equal(t, kinds, *runs)
	}
	t.Run("v2", func(t *testing.T) {
		t.Parallel()
		for _, door := range []string{"WrapV2", "HandlerV2"} {
			runs := 0
			e := newEngine(idempotent.NewMemoryStore())
			h := apigateway.HandlerV2(nethttp.Middleware(e)(answer(&runs)))
			if door == "WrapV2" {
				h = apigateway.WrapV2(e, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: fmt.Sprintf("run %d", runs)}, nil
				})
			}
			names := slices.Sorted(maps.Keys(v2))
			check(t, len(v2), &runs, func(kind string) (int, string, bool) {
				ev := fixtureV2(t, sampleevents.PaymentNew)
				v2[kind](&ev)
				out, err := h(t.Context(), ev)
				require.NoError(t, err)
				return out.StatusCode, out.Body, out.Headers[nethttp.HeaderReplayed] == "true"
			}, names)
		}
	})
	t.Run("v1", func(t *testing.T) {
		t.Parallel()
		for _, door := range []string{"WrapV1", "HandlerV1"} {
			runs := 0
			e := newEngine(idempotent.NewMemoryStore())
			h := apigateway.HandlerV1(nethttp.Middleware(e)(answer(&runs)))
			if door == "WrapV1" {
				h = apigateway.WrapV1(e, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
					runs++
					return events.APIGatewayProxyResponse{StatusCode: http.StatusCreated, Body: fmt.Sprintf("run %d", runs)}, nil
				})
			}
			names := slices.Sorted(maps.Keys(v1))
			check(t, len(v1), &runs, func(kind string) (int, string, bool) {
				ev := fixtureV1(t, restPayment)
				v1[kind](&ev)
				out, err := h(t.Context(), ev)
				require.NoError(t, err)
				return out.StatusCode, out.Body, out.Headers[nethttp.HeaderReplayed] == "true"
			}, names)
		}
	})
}

// TestSharedScopeWarning: a Lambda authorizer without a principalId is
// warned about once, for a request that carries an Idempotency-Key (one
// without has no scope to share): to the Engine's logger behind WrapV1 and
// WrapV2, to slog.Default() behind HandlerV1 and HandlerV2, which know no
// Engine. Not parallel: it sets slog.Default().
func TestSharedScopeWarning(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	for _, f := range doors {
		t.Run(f.name, func(t *testing.T) {
			var defaultLogs, engineLogs testlog.Buffer
			slog.SetDefault(testlog.Logger(&defaultLogs))
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&engineLogs))), (&counter{}).handle)
			logs := &engineLogs
			if strings.Contains(f.name, "http.Handler") {
				logs = &defaultLogs
			}
			get := req{method: http.MethodGet, lambdaAuth: map[string]any{"userId": "alice"}}
			assert.Equal(t, http.StatusOK, call(get).status)
			assert.NotContains(t, logs.String(), "apigateway.WithAuthorizerCaller", "no key, nothing shared")
			for _, user := range []string{"alice", "bob"} {
				r := post("k", "{}")
				r.lambdaAuth = map[string]any{"userId": user}
				call(r)
			}
			assert.Equal(t, 1, strings.Count(logs.String(), "apigateway.WithAuthorizerCaller"), "warned once: %s", logs.String())
			assert.Contains(t, logs.String(), `"level":"WARN"`)
		})
	}
}
