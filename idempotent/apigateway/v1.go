package apigateway

import (
	"context"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

// WrapV1 makes a REST API (Lambda proxy integration, payload format 1.0)
// handler idempotent by its Idempotency-Key header, through e: its store keeps
// the responses, and its settings (prefix, expiry, logger, hooks, optional
// keys) apply. The result never returns an error: every failure is answered with an
// HTTP status and an application/problem+json body (see the package
// documentation). It can be passed to lambda.Start.
//
// WrapV1 panics if e or handler is nil, or if the options are invalid.
func WrapV1(e *idempotent.Engine, handler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), opts ...Option) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	switch {
	case e == nil:
		panic("apigateway: WrapV1: nil Engine")
	case handler == nil:
		panic("apigateway: WrapV1: nil handler")
	}
	x := newEngine(e, opts)
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		out := x.serve(ctx, requestV1(&ev), func(ctx context.Context) (response, error) {
			r, err := handler(ctx, ev)
			return response{
				StatusCode:        r.StatusCode,
				Headers:           r.Headers,
				MultiValueHeaders: r.MultiValueHeaders,
				Body:              r.Body,
				IsBase64Encoded:   r.IsBase64Encoded,
			}, err
		})
		return events.APIGatewayProxyResponse{
			StatusCode:        out.StatusCode,
			Headers:           out.Headers,
			MultiValueHeaders: out.MultiValueHeaders,
			Body:              out.Body,
			IsBase64Encoded:   out.IsBase64Encoded,
		}, nil
	}
}

func requestV1(ev *events.APIGatewayProxyRequest) request {
	var query string
	switch {
	case len(ev.MultiValueQueryStringParameters) > 0:
		query = httprules.CanonicalQuery(url.Values(ev.MultiValueQueryStringParameters))
	case len(ev.QueryStringParameters) > 0:
		values := make(url.Values, len(ev.QueryStringParameters))
		for k, v := range ev.QueryStringParameters {
			values[k] = []string{v}
		}
		query = httprules.CanonicalQuery(values)
	}
	path := ev.Path
	if path == "" {
		path = ev.RequestContext.Path
	}
	method := ev.HTTPMethod
	if method == "" {
		method = ev.RequestContext.HTTPMethod
	}
	return request{
		method:      strings.ToUpper(method),
		path:        path,
		query:       query,
		keyValues:   httprules.HeaderValues(ev.Headers, ev.MultiValueHeaders, HeaderIdempotencyKey),
		contentType: firstValue(httprules.HeaderValues(ev.Headers, ev.MultiValueHeaders, "Content-Type")),
		body:        ev.Body,
		base64:      ev.IsBase64Encoded,
		scope:       scopeV1(&ev.RequestContext),
		lambdaAuth:  lambdaAuthorizerV1(&ev.RequestContext),
	}
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
