package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/internal/boot"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

func main() {
	boot.Logging(os.Stdout, os.Getenv)
	cfg, err := payments.ConfigFromEnv(os.Getenv)
	if err != nil {
		boot.Fatal(err)
	}
	client, err := boot.DynamoDB(context.Background())
	if err != nil {
		boot.Fatal(err)
	}
	lambda.Start(payments.New(dynamostore.New(client, cfg.IdempotencyTable), client, cfg.PaymentsTable))
}
