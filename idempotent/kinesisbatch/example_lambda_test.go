package kinesisbatch_test

// The Kinesis quick start of docs/streams.md, which quotes it
// (internal/doccheck checks that the quote matches). It is compiled, not
// run: lambda.Start serves invocations only inside Lambda.

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/kinesisbatch"
)

// Payment is the JSON data of a record of the stream.
type Payment struct {
	PaymentID string `json:"paymentId"`
	Amount    int64  `json:"amount"`
}

func recordPayment(ctx context.Context, p Payment) error {
	// Record it, passing idempotent.DownstreamKey(ctx) to any external API.
	_ = idempotent.DownstreamKey(ctx)
	return nil
}

// A Lambda function behind a Kinesis stream: each payment is recorded once,
// in shard order, and the response tells Lambda where to resume the shard
// (enable ReportBatchItemFailures on the event source mapping).
func Example_lambdaStart() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(kinesisbatch.Wrap(idempotent.New(store), recordPayment,
		kinesisbatch.WithKey(func(p Payment) (string, error) { return p.PaymentID, nil })))
}
