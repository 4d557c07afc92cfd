package apigateway_test

// The API Gateway quick start of docs/getting-started.md, which quotes it
// (internal/doccheck checks that the quote matches). It is compiled, not
// run: lambda.Start serves invocations only inside Lambda.

import (
	"context"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

func createPayment(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	// Charge, passing idempotent.DownstreamKey(ctx) to the payment provider.
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"status":"captured"}`}, nil
}

// A Lambda function behind an HTTP API (payload format 2.0): POST and PATCH
// requests need an Idempotency-Key header, and a retry gets the first
// response again, marked Idempotent-Replayed: true.
func Example_lambdaStart() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	engine := idempotent.New(store, idempotent.WithExpiry(24*time.Hour))
	lambda.Start(apigateway.WrapV2(engine, createPayment))
}
