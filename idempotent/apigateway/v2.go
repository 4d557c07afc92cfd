package apigateway

import (
	"context"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

// WrapV2 makes an HTTP API (payload format 2.0) handler idempotent by its
// Idempotency-Key header, through e: its store keeps the responses, and its
// settings (prefix, expiry, logger, hooks, optional keys) apply. The result never
// returns an error: every failure is answered with an HTTP status and an
// application/problem+json body (see the package documentation). It can be
// passed to lambda.Start.
//
// WrapV2 panics if e or handler is nil, or if the options are invalid.
func WrapV2(e *idempotent.Engine, handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), opts ...Option) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	switch {
	case e == nil:
		panic("apigateway: WrapV2: nil Engine")
	case handler == nil:
		panic("apigateway: WrapV2: nil handler")
	}
	x := newEngine(e, opts)
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		out := x.serve(ctx, requestV2(&ev), func(ctx context.Context) (response, error) {
			r, err := handler(ctx, ev)
			return response{
				StatusCode:        r.StatusCode,
				Headers:           r.Headers,
				MultiValueHeaders: r.MultiValueHeaders,
				Cookies:           r.Cookies,
				Body:              r.Body,
				IsBase64Encoded:   r.IsBase64Encoded,
			}, err
		})
		return events.APIGatewayV2HTTPResponse{
			StatusCode:        out.StatusCode,
			Headers:           out.Headers,
			MultiValueHeaders: out.MultiValueHeaders,
			Cookies:           out.Cookies,
			Body:              out.Body,
			IsBase64Encoded:   out.IsBase64Encoded,
		}, nil
	}
}

func requestV2(ev *events.APIGatewayV2HTTPRequest) request {
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	var query string
	if ev.RawQueryString != "" {
		query = httprules.CanonicalRawQuery(ev.RawQueryString)
	} else if len(ev.QueryStringParameters) > 0 {
		values := make(url.Values, len(ev.QueryStringParameters))
		for k, v := range ev.QueryStringParameters {
			values[k] = []string{v}
		}
		query = httprules.CanonicalQuery(values)
	}
	return request{
		method:      strings.ToUpper(ev.RequestContext.HTTP.Method),
		path:        path,
		query:       query,
		keyValues:   httprules.HeaderValues(ev.Headers, nil, HeaderIdempotencyKey),
		contentType: firstValue(httprules.HeaderValues(ev.Headers, nil, "Content-Type")),
		body:        ev.Body,
		base64:      ev.IsBase64Encoded,
		scope:       scopeV2(&ev.RequestContext),
		lambdaAuth:  lambdaAuthorizerV2(&ev.RequestContext),
	}
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
