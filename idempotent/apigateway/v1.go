package apigateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idempotent"
)

// HandlerV1 serves REST API (Lambda proxy integration, payload format 1.0) events with h, as lambdaurl.Wrap serves
// Function URL events: each event becomes an *http.Request (see the package
// documentation, "Requests") whose context carries the event
// (RequestV1FromContext), and what h writes becomes the event response. Any
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
// HandlerV1 panics if h is nil or opts hold WithHTTPOptions.
func HandlerV1(h http.Handler, opts ...Option) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	if h == nil {
		panic("apigateway: HandlerV1: nil handler")
	}
	o := handlerOptions("HandlerV1", opts)
	d := &door[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{payload: payloadV1, h: h, log: slog.Default,
		callers: &callers{field: o.field, log: slog.Default}}
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		inv := &invocation[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{ev: ev}
		d.serve(ctx, inv)
		return d.response(&inv.rec), nil
	}
}

// WrapV1 makes a typed REST API (Lambda proxy integration, payload format 1.0) handler idempotent by
// its Idempotency-Key header, through e: its store keeps the responses, and
// its settings (prefix, expiry, logger, hooks, optional keys) apply. It is
// HandlerV1 around nethttp.Middleware(e) around handler, with keys scoped
// to the authorizer's caller (see the package documentation, "Caller
// scoping"; WithAuthorizerCaller names a Lambda authorizer's field instead)
// and the middleware's options given with WithHTTPOptions. The handler
// gets the original event; a response it returns reaches its client
// unchanged, and an error or panic is answered 500 internal-error and logged
// (see the package documentation, "Answers"). The result never returns an
// error, and can be passed to lambda.Start.
//
// WrapV1 panics if e or handler is nil, or if the options are invalid.
func WrapV1(e *idempotent.Engine, handler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), opts ...Option) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	switch {
	case e == nil:
		panic("apigateway: WrapV1: nil Engine")
	case handler == nil:
		panic("apigateway: WrapV1: nil handler")
	}
	return wrap(e, handler, payloadV1, writeV1, opts)
}

var payloadV1 = payload[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{request: requestV1, response: responseV1, caller: callerV1}

// requestV1 is a REST API event as an HTTP request: its method and path (of
// the request context when the event's own are empty), query parameters
// (the multi-value ones when there are any), and headers (the multi-value
// ones, and those only the single-value map holds).
func requestV1(ctx context.Context, room *requestRoom, ev *events.APIGatewayProxyRequest) (*http.Request, error) {
	method := ev.HTTPMethod
	if method == "" {
		method = ev.RequestContext.HTTPMethod
	}
	if method == "" {
		return nil, errNoMethod
	}
	path := ev.Path
	if path == "" {
		path = ev.RequestContext.Path
	}
	var query string
	switch {
	case len(ev.MultiValueQueryStringParameters) > 0:
		query = url.Values(ev.MultiValueQueryStringParameters).Encode()
	case len(ev.QueryStringParameters) > 0:
		values := make(url.Values, len(ev.QueryStringParameters))
		for k, v := range ev.QueryStringParameters {
			values[k] = []string{v}
		}
		query = values.Encode()
	}
	r := newRequest(ctx, room, method, path, query, headerV1(ev.Headers, ev.MultiValueHeaders), ev.Body, ev.IsBase64Encoded)
	r.Host, r.RemoteAddr = ev.RequestContext.DomainName, ev.RequestContext.Identity.SourceIP
	return r, nil
}

// headerV1 is the header of a REST API event: its multi-value headers, and
// the single-value headers the multi-value map lacks (API Gateway sends
// both maps with the same names).
func headerV1(single map[string]string, multi map[string][]string) http.Header {
	h := make(http.Header, max(len(single), len(multi)))
	addMulti(h, multi)
	var rest map[string]string
	for k, v := range single {
		if _, ok := h[http.CanonicalHeaderKey(k)]; !ok || len(multi) == 0 {
			if rest == nil {
				rest = make(map[string]string, len(single))
			}
			rest[k] = v
		}
	}
	addSingle(h, rest)
	return h
}

func writeV1(w http.ResponseWriter, out *events.APIGatewayProxyResponse) written {
	return writeResponse(w, out.StatusCode, out.Headers, out.MultiValueHeaders, nil, out.Body, out.IsBase64Encoded)
}

func responseV1(rec *recorder) events.APIGatewayProxyResponse {
	out := events.APIGatewayProxyResponse{StatusCode: rec.status}
	out.Headers, out.MultiValueHeaders, _ = rec.headers(false)
	out.Body, out.IsBase64Encoded = rec.bodyOf()
	return out
}

// callerV1 is the caller of a REST API event, for its door.
func callerV1(ev *events.APIGatewayProxyRequest) (string, map[string]any) {
	return scopeV1(&ev.RequestContext), lambdaAuthorizerV1(&ev.RequestContext)
}

// scopeV1 names the caller of a REST API request: the Cognito user pool
// authorizer's issuer and subject claims, a Lambda authorizer's principalId,
// the Cognito identity (IAM auth through an identity pool), the IAM user ARN
// (else account and caller id), or the API key id; anonymous otherwise.
func scopeV1(rc *events.APIGatewayProxyRequestContext) string {
	if claims := stringMap(rc.Authorizer["claims"]); claims != nil {
		if sub := claims["sub"]; sub != "" {
			return principal(callerJWT, claims["iss"], sub)
		}
		if client := claims["client_id"]; client != "" {
			return principal(callerJWTClient, claims["iss"], client)
		}
	}
	if id, ok := rc.Authorizer["principalId"].(string); ok && id != "" {
		return principal(callerLambda, id)
	}
	id := &rc.Identity
	switch {
	case id.CognitoIdentityID != "":
		return principal(callerCognito, id.CognitoIdentityPoolID, id.CognitoIdentityID)
	case id.UserArn != "":
		return principal(callerIAM, id.UserArn)
	case id.Caller != "":
		return principal(callerIAMCaller, id.AccountID, id.Caller)
	case id.APIKeyID != "":
		return principal(callerAPIKey, id.APIKeyID)
	}
	return anonymous
}

// lambdaAuthorizerV1 returns the authorizer context of a REST API request
// authorized by a Lambda authorizer (its principalId and context fields,
// flattened); nil for other requests.
func lambdaAuthorizerV1(rc *events.APIGatewayProxyRequestContext) map[string]any {
	// A Cognito user pool authorizer's claims are a map; a Lambda authorizer
	// may well have a context field named "claims" of its own.
	if len(rc.Authorizer) == 0 || stringMap(rc.Authorizer["claims"]) != nil {
		return nil
	}
	return rc.Authorizer
}

// stringMap reads the string values of an authorizer's claims, which are a
// map[string]any when the event was decoded from JSON and may be a
// map[string]string when it was built in Go.
func stringMap(v any) map[string]string {
	switch m := v.(type) {
	case map[string]string:
		return m
	case map[string]any:
		out := make(map[string]string, len(m))
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
		return out
	}
	return nil
}
