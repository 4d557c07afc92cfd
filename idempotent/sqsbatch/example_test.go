package sqsbatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

// Order is the body of an order message.
type Order struct {
	OrderID string `json:"orderId"`
	Cents   int    `json:"cents"`
}

// Validate makes a message that decodes but makes no sense a failure.
func (o Order) Validate() error {
	if o.OrderID == "" || o.Cents <= 0 {
		return errors.New("order needs an id and a positive amount")
	}
	return nil
}

// A batch holding the same order twice (as SNS fan-out or a retrying producer
// delivers it, under a new message ID) and a poison message: the order is
// charged once, and only the poison message is reported, so that only it is
// retried and, after maxReceiveCount, moved to the dead-letter queue.
func Example() {
	store := idempotent.NewMemoryStore() // dynamostore.New(...) in production
	engine := idempotent.New(store,
		idempotent.WithLogger(slog.New(slog.DiscardHandler))) // keep the example's output clean
	handler := sqsbatch.Wrap(engine, func(ctx context.Context, o Order) error {
		fmt.Printf("charging %s: %d cents\n", o.OrderID, o.Cents)
		return nil
	},
		sqsbatch.WithKey(func(o Order) (string, error) { return o.OrderID, nil }),
	)
	// In main: lambda.Start(handler)

	resp, err := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "msg-1", Body: `{"orderId":"o-1","cents":1250}`},
		{MessageId: "msg-2", Body: `{"orderId":"o-2","cents":300}`},
		{MessageId: "msg-3", Body: `{"orderId":"o-1","cents":1250}`}, // duplicate of msg-1
		{MessageId: "msg-4", Body: `{"orderId":"o-3","cents":-5}`},   // poison
	}})
	if err != nil {
		panic(err) // never happens: failures are reported per message
	}
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	// Unordered output:
	// charging o-1: 1250 cents
	// charging o-2: 300 cents
	// {"batchItemFailures":[{"itemIdentifier":"msg-4"}]}
}

// On a FIFO queue the messages of a message group are processed in order; the
// first failure fails the rest of its group unprocessed, so that they are
// retried in order. Other groups are not affected.
func ExampleWrap_fifo() {
	fifo := func(id, group, body string) events.SQSMessage {
		return events.SQSMessage{
			MessageId:      id,
			Body:           body,
			EventSourceARN: "arn:aws:sqs:eu-west-1:000000000000:orders.fifo",
			Attributes:     map[string]string{"MessageGroupId": group},
		}
	}
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	handler := sqsbatch.Wrap(engine, func(ctx context.Context, o Order) error {
		if o.OrderID == "o-2" {
			return errors.New("payment provider unavailable")
		}
		fmt.Println("processed", o.OrderID)
		return nil
	}, sqsbatch.WithParallelism(4)) // a plain option: it takes no function of the message

	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		fifo("msg-1", "customer-a", `{"orderId":"o-1","cents":100}`),
		fifo("msg-2", "customer-a", `{"orderId":"o-2","cents":100}`),
		fifo("msg-3", "customer-a", `{"orderId":"o-3","cents":100}`),
	}})
	for _, f := range resp.BatchItemFailures {
		fmt.Println("failed", f.ItemIdentifier)
	}
	// Output:
	// processed o-1
	// failed msg-2
	// failed msg-3
}

// A key taken from the body, with payload validation narrowed to the part that
// matters: a message of an SNS topic (without raw message delivery) arrives
// wrapped in an envelope whose MessageId and Timestamp change when the
// producer publishes the same order again.
func ExampleWithPayloadValidation() {
	type envelope struct {
		MessageID string `json:"MessageId"`
		Timestamp string `json:"Timestamp"`
		Message   string `json:"Message"` // the published order, as JSON text
	}
	orderOf := func(e envelope) (Order, error) {
		var o Order
		err := json.Unmarshal([]byte(e.Message), &o)
		return o, err
	}
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	handler := sqsbatch.Wrap(engine, func(ctx context.Context, e envelope) error {
		o, err := orderOf(e)
		if err != nil {
			return err
		}
		fmt.Println("shipping", o.OrderID)
		return nil
	},
		sqsbatch.WithKey(func(e envelope) (string, error) {
			o, err := orderOf(e)
			return o.OrderID, err
		}),
		sqsbatch.WithPayloadValidation(func(e envelope) (any, error) {
			return json.RawMessage(e.Message), nil // the order, not the envelope
		}),
	)
	order := `"{\"orderId\":\"o-9\",\"cents\":700}"`
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "msg-1", Body: `{"MessageId":"sns-1","Timestamp":"2025-06-01T10:00:00Z","Message":` + order + `}`},
		{MessageId: "msg-2", Body: `{"MessageId":"sns-2","Timestamp":"2025-06-01T10:00:07Z","Message":` + order + `}`},
	}})
	fmt.Println("failures:", len(resp.BatchItemFailures))
	// Output:
	// shipping o-9
	// failures: 0
}
