package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/internal/boot"
	"github.com/idemkit/idemkit/functions/receipts"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/emf"
)

func main() {
	logger := boot.Logging(os.Stdout, os.Getenv)
	cfg, err := receipts.ConfigFromEnv(os.Getenv)
	if err != nil {
		boot.Fatal(err)
	}
	client, err := boot.DynamoDB(context.Background())
	if err != nil {
		boot.Fatal(err)
	}
	// Outcome metrics as CloudWatch EMF lines on stdout: namespace idemkit, dimension FunctionName.
	metrics := emf.New(os.Stdout)
	lambda.Start(receipts.New(dynamostore.New(client, cfg.IdempotencyTable), &receipts.LocalMailer{Logger: logger},
		idempotent.WithOutcomeHook(metrics.Hook)))
}
