package kafkabatch_test

// The Kafka quick start of docs/streams.md, which quotes it
// (internal/doccheck checks that the quote matches). It is compiled, not
// run: lambda.Start serves invocations only inside Lambda.

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/kafkabatch"
)

// Payment is the JSON value of a record of the topic.
type Payment struct {
	PaymentID string `json:"paymentId"`
	Amount    int64  `json:"amount"`
}

func recordPayment(ctx context.Context, p Payment) error {
	_ = idempotent.DownstreamKey(ctx)
	return nil
}

// A Lambda function behind an Amazon MSK or self-managed Kafka topic: each
// payment is recorded once per idempotency-key header, in offset order per
// partition, and the response tells Lambda where to resume each partition
// (provisioned mode, ReportBatchItemFailures).
func Example_lambdaStart() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(kafkabatch.Wrap(idempotent.New(store), recordPayment,
		kafkabatch.WithRecordKey(func(r events.KafkaRecord) (string, error) {
			key, _ := kafkabatch.Header(r, "idempotency-key")
			return string(key), nil
		}),
		kafkabatch.WithParallelism(4)))
}
