package sqsbatch_test

// The SQS examples of docs/choosing-keys.md. The documentation quotes them
// (internal/doccheck checks that the quotes match), and `go test` runs them.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

// The default key, the SQS message ID, recognizes SQS's own redeliveries (a
// message whose visibility timeout ran out comes back with the same ID). A
// producer that retries SendMessage creates a new message with a new ID;
// only a key taken from the body recognizes it.
func ExampleWithKey_messageID() {
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "a1", Body: `{"orderId":"o-1","cents":1250}`},
		{MessageId: "a1", Body: `{"orderId":"o-1","cents":1250}`, // SQS delivers a1 again
			Attributes: map[string]string{"ApproximateReceiveCount": "2"}},
		{MessageId: "b2", Body: `{"orderId":"o-1","cents":1250}`}, // the producer sent o-1 twice
	}}

	var charges atomic.Int64 // a standard queue's messages run side by side
	charge := func(ctx context.Context, o Order) error { charges.Add(1); return nil }

	engine := func() *idempotent.Engine {
		return idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	}
	byMessageID := sqsbatch.Wrap(engine(), charge) // the default key
	_, _ = byMessageID(context.Background(), batch)
	fmt.Println("keyed on the message ID, charges:", charges.Load())

	charges.Store(0)
	byOrder := sqsbatch.Wrap(engine(), charge,
		sqsbatch.WithKey(func(o Order) (string, error) { return o.OrderID, nil }))
	_, _ = byOrder(context.Background(), batch)
	fmt.Println("keyed on orderId, charges:", charges.Load())
	// Output:
	// keyed on the message ID, charges: 2
	// keyed on orderId, charges: 1
}

// An SQS queue subscribed to an SNS topic (without raw message delivery)
// receives the SNS envelope as the body. Republishing to the topic makes a
// new SNS MessageId and Timestamp, and fan-out gives every queue its own SQS
// message ID: key on the business identifier inside the envelope's Message,
// and validate only that inner message, not the envelope around it.
func ExampleWithKey_snsFanOut() {
	inner := func(n events.SNSEntity) (Order, error) {
		var o Order
		err := json.Unmarshal([]byte(n.Message), &o)
		return o, err
	}
	charges := 0
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	handler := sqsbatch.Wrap(engine,
		func(ctx context.Context, n events.SNSEntity) error {
			o, err := inner(n)
			if err != nil {
				return err
			}
			charges += o.Cents
			return nil
		},
		sqsbatch.WithKey(func(n events.SNSEntity) (string, error) {
			o, err := inner(n)
			return o.OrderID, err
		}),
		sqsbatch.WithPayloadValidation(func(n events.SNSEntity) (any, error) {
			return json.RawMessage(n.Message), nil // compared as canonical JSON
		}),
	)

	envelope := func(snsID string, sent time.Time) string {
		b, _ := json.Marshal(events.SNSEntity{Type: "Notification", MessageID: snsID, Timestamp: sent,
			TopicArn: "arn:aws:sns:eu-west-1:000000000000:orders", Message: `{"orderId":"o-7","cents":500}`})
		return string(b)
	}
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: envelope("sns-1", time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))},
		{MessageId: "m-2", Body: envelope("sns-2", time.Date(2026, 1, 1, 9, 0, 5, 0, time.UTC))}, // republished
	}})
	fmt.Println("cents charged:", charges, "failures:", len(resp.BatchItemFailures))
	// Output: cents charged: 500 failures: 0
}
