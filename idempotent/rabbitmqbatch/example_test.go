package rabbitmqbatch_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/rabbitmqbatch"
)

// A failed message fails the batch (Amazon MQ takes no partial response), so
// the broker delivers all of it again: the message done replays from its
// record, and only the failed one runs again.
func Example() {
	engine := idempotent.New(idempotent.NewMemoryStore(), // dynamostore.New(...) in production
		idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	down := true // the payment processor is down during the first delivery
	handler := rabbitmqbatch.Wrap(engine, func(_ context.Context, p struct {
		PaymentID string `json:"paymentId"`
	}) error {
		if down && p.PaymentID == "pay-2" {
			return errors.New("processor unavailable")
		}
		fmt.Println("charging", p.PaymentID)
		return nil
	})
	msg := func(id, payment string) events.RabbitMQMessage {
		return events.RabbitMQMessage{
			BasicProperties: events.RabbitMQBasicProperties{MessageID: &id},
			Data:            base64.StdEncoding.EncodeToString([]byte(`{"paymentId":"` + payment + `"}`)),
		}
	}
	ev := events.RabbitMQEvent{MessagesByQueue: map[string][]events.RabbitMQMessage{
		"payments::/": {msg("m-1", "pay-1"), msg("m-2", "pay-2")},
	}}
	// In main: lambda.Start(handler)

	fmt.Println(handler(context.Background(), ev))
	down = false
	fmt.Println(handler(context.Background(), ev)) // the redelivery
	// Output:
	// charging pay-1
	// rabbitmqbatch: 1 message(s) not done, the batch must be delivered again: "m-2"
	// charging pay-2
	// <nil>
}
