package apigateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idempotent"
)

// HandlerV2 serves HTTP API (payload format 2.0) events with h, as lambdaurl.Wrap serves
// Function URL events: each event becomes an *http.Request (see the package
// documentation, "Requests") whose context carries the event
// (RequestV2FromContext), and what h writes becomes the event response. Any
// http.Handler runs behind it unchanged; for idempotency, put
// nethttp.Middleware around h. The request's context names the
// authorizer's caller with nethttp.ContextWithScope, so the middleware
// scopes keys to it (see the package documentation, "Caller scoping"; opts
// may say WithAuthorizerCaller). The result never returns an error, and can
// be passed to lambda.Start.
//
// An event without an HTTP method is answered 400 malformed-request without
// running h, and a panic that leaves h is answered 500 internal-error; both
// are logged at error level to slog.Default().
//
// HandlerV2 panics if h is nil or opts hold WithHTTPOptions.
func HandlerV2(h http.Handler, opts ...Option) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if h == nil {
		panic("apigateway: HandlerV2: nil handler")
	}
	o := handlerOptions("HandlerV2", opts)
	d := &door[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{payload: payloadV2, h: h, log: slog.Default,
		callers: &callers{field: o.field, log: slog.Default}}
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		inv := &invocation[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{ev: ev}
		d.serve(ctx, inv)
		return d.response(&inv.rec), nil
	}
}

// WrapV2 makes a typed HTTP API (payload format 2.0) handler idempotent by
// its Idempotency-Key header, through e: its store keeps the responses, and
// its settings (prefix, expiry, logger, hooks, optional keys) apply. It is
// HandlerV2 around nethttp.Middleware(e) around handler, with keys scoped
// to the authorizer's caller (see the package documentation, "Caller
// scoping"; WithAuthorizerCaller names a Lambda authorizer's field instead)
// and the middleware's options given with WithHTTPOptions. The handler
// gets the original event; a response it returns reaches its client
// unchanged, and an error or panic is answered 500 internal-error and logged
// (see the package documentation, "Answers"). The result never returns an
// error, and can be passed to lambda.Start.
//
// WrapV2 panics if e or handler is nil, or if the options are invalid.
func WrapV2(e *idempotent.Engine, handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), opts ...Option) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	switch {
	case e == nil:
		panic("apigateway: WrapV2: nil Engine")
	case handler == nil:
		panic("apigateway: WrapV2: nil handler")
	}
	return wrap(e, handler, payloadV2, writeV2, opts)
}

var payloadV2 = payload[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{request: requestV2, response: responseV2, caller: callerV2}

// requestV2 is an HTTP API event as an HTTP request: its method, raw path
// (the request context's path when it is empty), raw query (the query
// parameters, when it is empty), headers and cookies.
func requestV2(ctx context.Context, room *requestRoom, ev *events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	rc := &ev.RequestContext
	if rc.HTTP.Method == "" {
		return nil, errNoMethod
	}
	path := ev.RawPath
	if path == "" {
		path = rc.HTTP.Path
	}
	query := ev.RawQueryString
	if query == "" && len(ev.QueryStringParameters) > 0 {
		values := make(url.Values, len(ev.QueryStringParameters))
		for k, v := range ev.QueryStringParameters {
			values[k] = []string{v}
		}
		query = values.Encode()
	}
	h := make(http.Header, len(ev.Headers)+1)
	addSingle(h, ev.Headers)
	if len(ev.Cookies) > 0 && h["Cookie"] == nil {
		h["Cookie"] = []string{strings.Join(ev.Cookies, "; ")}
	}
	r := newRequest(ctx, room, rc.HTTP.Method, path, query, h, ev.Body, ev.IsBase64Encoded)
	r.Host, r.RemoteAddr = rc.DomainName, rc.HTTP.SourceIP
	return r, nil
}

func writeV2(w http.ResponseWriter, out *events.APIGatewayV2HTTPResponse) written {
	return writeResponse(w, out.StatusCode, out.Headers, out.MultiValueHeaders, out.Cookies, out.Body, out.IsBase64Encoded)
}

func responseV2(rec *recorder) events.APIGatewayV2HTTPResponse {
	out := events.APIGatewayV2HTTPResponse{StatusCode: rec.status}
	out.Headers, out.MultiValueHeaders, out.Cookies = rec.headers(true)
	out.Body, out.IsBase64Encoded = rec.bodyOf()
	return out
}

// callerV2 is the caller of an HTTP API event, for its door.
func callerV2(ev *events.APIGatewayV2HTTPRequest) (string, map[string]any) {
	return scopeV2(&ev.RequestContext), lambdaAuthorizerV2(&ev.RequestContext)
}

// lambdaAuthorizerV2 returns the context a Lambda authorizer gave an HTTP API
// request, empty but not nil when it gave none; nil for requests no Lambda
// authorizer authorized (none, or a JWT or IAM authorizer).
func lambdaAuthorizerV2(rc *events.APIGatewayV2HTTPRequestContext) map[string]any {
	a := rc.Authorizer
	if a == nil || a.JWT != nil || a.IAM != nil {
		return nil
	}
	if a.Lambda == nil {
		return map[string]any{}
	}
	return a.Lambda
}

// scopeV2 names the caller of an HTTP API request: the JWT authorizer's
// issuer and subject (or client_id when there is no subject), the IAM
// caller (its Cognito identity when it came through an identity pool, else
// its user ARN, else its account and caller id), or a Lambda authorizer's
// principalId; anonymous otherwise.
func scopeV2(rc *events.APIGatewayV2HTTPRequestContext) string {
	a := rc.Authorizer
	if a == nil {
		return anonymous
	}
	if a.JWT != nil {
		iss := a.JWT.Claims["iss"]
		if sub := a.JWT.Claims["sub"]; sub != "" {
			return principal(callerJWT, iss, sub)
		}
		if client := a.JWT.Claims["client_id"]; client != "" {
			return principal(callerJWTClient, iss, client)
		}
	}
	if iam := a.IAM; iam != nil {
		switch {
		case iam.CognitoIdentity.IdentityID != "":
			return principal(callerCognito, iam.CognitoIdentity.IdentityPoolID, iam.CognitoIdentity.IdentityID)
		case iam.UserARN != "":
			return principal(callerIAM, iam.UserARN)
		case iam.CallerID != "":
			return principal(callerIAMCaller, iam.AccountID, iam.CallerID)
		}
	}
	if id, ok := a.Lambda["principalId"].(string); ok && id != "" {
		return principal(callerLambda, id)
	}
	return anonymous
}
