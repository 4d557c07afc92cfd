package sqsbatch_test

// The SQS quick start of docs/getting-started.md, which quotes it
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
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

func reserveStock(ctx context.Context, o Order) error {
	// Reserve, passing idempotent.DownstreamKey(ctx) to any external API.
	_ = idempotent.DownstreamKey(ctx)
	return nil
}

// A Lambda function behind an SQS queue: each message runs once per order,
// and the messages that failed are reported as a partial batch response
// (enable ReportBatchItemFailures on the event source mapping).
func Example_lambdaStart() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(sqsbatch.Wrap(idempotent.New(store), reserveStock,
		sqsbatch.WithKey(func(o Order) (string, error) { return o.OrderID, nil })))
}
