package apigateway_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

func ExampleWrapV2() {
	charges := 0
	createPayment := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		charges++ // the side effect that must happen once
		return events.APIGatewayV2HTTPResponse{
			StatusCode: http.StatusCreated,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       fmt.Sprintf(`{"payment":%d}`, charges),
		}, nil
	}

	// The core is configured once; in a Lambda function:
	// lambda.Start(apigateway.WrapV2(engine, createPayment)).
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithExpiry(24*time.Hour))
	handler := apigateway.WrapV2(engine, createPayment)

	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/payments",
		Headers: map[string]string{
			"idempotency-key": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
			"content-type":    "application/json",
		},
		Body: `{"amount":1000,"currency":"EUR"}`,
	}
	req.RequestContext.HTTP.Method = http.MethodPost

	for range 2 { // the client retries, say after a timeout
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers[nethttp.HeaderReplayed] == "true")
	}
	fmt.Println("charges:", charges)

	// Output:
	// 201 {"payment":1} replayed: false
	// 201 {"payment":1} replayed: true
	// charges: 1
}

func ExampleWrapV1() {
	handler := apigateway.WrapV1(idempotent.New(idempotent.NewMemoryStore()), func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: http.StatusOK, Body: "done"}, nil
	})

	// A POST without an Idempotency-Key is refused with a problem.
	resp, _ := handler(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Path: "/orders"})
	fmt.Println(resp.StatusCode, resp.Headers["Content-Type"])
	fmt.Println(resp.Body)

	// Output:
	// 400 application/problem+json
	// {"type":"https://idemkit.dev/problems/missing-key","title":"Idempotency-Key header missing","status":400,"detail":"This operation requires an Idempotency-Key header; send a unique key, such as a UUID, and reuse it only to retry the same request."}
}

func ExampleWrapV1_methods() {
	// PUT and DELETE are idempotent by definition, but a PUT whose handler
	// also charges a card is not: require a key for it too.
	_ = apigateway.WrapV1(idempotent.New(idempotent.NewMemoryStore()), func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}, nil
	}, apigateway.WithHTTPOptions(nethttp.WithMethods(http.MethodPost, http.MethodPut, http.MethodPatch)))
}

func ExampleHandlerV2() {
	// Any net/http handler runs behind API Gateway unchanged; for
	// idempotency, nethttp.Middleware goes around it. The door names the
	// authorizer's caller in each request's context, and the middleware
	// scopes keys to it.
	charges := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		charges++                                             // the side effect that must happen once
		ev, _ := apigateway.RequestV2FromContext(r.Context()) // what only API Gateway knows
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d,"stage":%q}`, charges, ev.RequestContext.Stage)
	})
	engine := idempotent.New(idempotent.NewMemoryStore())
	idem := nethttp.Middleware(engine)
	handler := apigateway.HandlerV2(idem(mux)) // in a Lambda function: lambda.Start(handler)

	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/payments",
		Headers: map[string]string{"idempotency-key": "8e03978e-40d5", "content-type": "application/json"},
		Body:    `{"amount":1000,"currency":"EUR"}`,
	}
	req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path, req.RequestContext.Stage = http.MethodPost, "/payments", "live"

	for range 2 { // the client retries
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers[nethttp.HeaderReplayed] == "true")
	}
	fmt.Println("charges:", charges)

	// Output:
	// 201 {"payment":1,"stage":"live"} replayed: false
	// 201 {"payment":1,"stage":"live"} replayed: true
	// charges: 1
}
