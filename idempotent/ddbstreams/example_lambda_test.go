package ddbstreams_test

// The DynamoDB Streams quick start of docs/streams.md, which quotes it
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
	"github.com/idemkit/idemkit/idempotent/ddbstreams"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// Payment is an item of the payments table.
type Payment struct {
	PaymentID  string `dynamodbav:"paymentId"`
	CustomerID string `dynamodbav:"customerId"`
	Amount     int64  `dynamodbav:"amount"`
}

func sendReceipt(ctx context.Context, p Payment) error {
	// Send it, passing idempotent.DownstreamKey(ctx) to the mail API.
	_ = idempotent.DownstreamKey(ctx)
	return nil
}

// A receipts function on the stream of the payments table: one receipt per
// payment, keyed on the item, so that its later changes (a refund, say) are
// duplicates that do not send another.
func Example_lambdaStart() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(ddbstreams.Wrap(idempotent.New(store), func(ctx context.Context, c ddbstreams.Change[Payment]) error {
		if c.EventName != ddbstreams.Insert {
			return nil
		}
		return sendReceipt(ctx, *c.NewImage)
	}, ddbstreams.WithKey(func(c ddbstreams.Change[Payment]) (string, error) {
		return c.Key.PaymentID, nil
	})))
}
