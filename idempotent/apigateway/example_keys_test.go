package apigateway_test

// The API Gateway example of docs/choosing-keys.md. The documentation quotes
// it (internal/doccheck checks that the quote matches), and `go test` runs it.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// The adapter keys on the Idempotency-Key header, scoped to the
// authenticated caller, and compares method, path, query and body: a retry
// with a new request ID is replayed, while another caller who sends the same
// key and body gets a response of their own.
func ExampleWrapV2_callerScope() {
	payments := 0
	handler := apigateway.WrapV2(idempotent.New(idempotent.NewMemoryStore()),
		func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			payments++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: fmt.Sprintf(`{"payment":%d}`, payments)}, nil
		})

	request := func(requestID, subject string) events.APIGatewayV2HTTPRequest {
		req := events.APIGatewayV2HTTPRequest{
			RawPath: "/payments",
			Headers: map[string]string{"idempotency-key": "8e03978e", "content-type": "application/json"},
			Body:    `{"amount":2500}`,
		}
		req.RequestContext.RequestID = requestID
		req.RequestContext.HTTP.Method = http.MethodPost
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
				Claims: map[string]string{"iss": "https://cognito-idp.eu-west-1.amazonaws.com/pool", "sub": subject}},
		}
		return req
	}
	for _, req := range []events.APIGatewayV2HTTPRequest{
		request("req-1", "alice"),
		request("req-2", "alice"), // Alice's retry
		request("req-3", "bob"),   // Bob, same key and body
	} {
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers[nethttp.HeaderReplayed] == "true")
	}
	// Output:
	// 201 {"payment":1} replayed: false
	// 201 {"payment":1} replayed: true
	// 201 {"payment":2} replayed: false
}

// An HTTP API Lambda authorizer with simple responses passes its context but
// no principalId: name the context field that identifies the caller, and each
// caller gets their own key space. A request whose authorizer context lacks
// the field is refused (500) rather than put in a shared scope.
func ExampleWithAuthorizerCaller() {
	payments := 0
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	handler := apigateway.WrapV2(engine,
		func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			payments++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: fmt.Sprintf(`{"payment":%d}`, payments)}, nil
		},
		apigateway.WithAuthorizerCaller("userId"))

	request := func(authorizerContext map[string]any) events.APIGatewayV2HTTPRequest {
		req := events.APIGatewayV2HTTPRequest{
			RawPath: "/payments",
			Headers: map[string]string{"idempotency-key": "8e03978e", "content-type": "application/json"},
			Body:    `{"amount":2500}`,
		}
		req.RequestContext.HTTP.Method = http.MethodPost
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: authorizerContext}
		return req
	}
	for _, req := range []events.APIGatewayV2HTTPRequest{
		request(map[string]any{"userId": "alice"}),
		request(map[string]any{"userId": "alice"}), // Alice's retry
		request(map[string]any{"userId": "bob"}),   // Bob, same key and body
		request(map[string]any{"tenant": "acme"}),  // no userId: refused
	} {
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Headers[nethttp.HeaderReplayed] == "true", payments)
	}
	// Output:
	// 201 false 1
	// 201 true 1
	// 201 false 2
	// 500 false 2
}
