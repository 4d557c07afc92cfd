package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/internal/boot"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/emf"
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
	// Outcome metrics as CloudWatch EMF lines on stdout: namespace idemkit, dimension FunctionName.
	metrics := emf.New(os.Stdout)
	// The sample's card processor is an in-process stand-in that honours
	// idempotency keys; a real function passes its processor's client.
	processor := &payments.LocalProcessor{}
	lambda.Start(payments.New(dynamostore.New(client, cfg.IdempotencyTable), processor, client, cfg.PaymentsTable,
		idempotent.WithOutcomeHook(metrics.Hook)))
}
