package activemqbatch_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/activemqbatch"
)

// Each message runs once per JMS message ID: a redelivered batch (Amazon MQ
// delivers the whole batch again after a failure) replays what was done.
func Example() {
	engine := idempotent.New(idempotent.NewMemoryStore(), // dynamostore.New(...) in production
		idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	handler := activemqbatch.Wrap(engine, func(_ context.Context, o struct {
		OrderID string `json:"orderId"`
	}) error {
		fmt.Println("shipping", o.OrderID)
		return nil
	})
	ev := events.ActiveMQEvent{Messages: []events.ActiveMQMessage{
		{MessageID: "ID:broker-1-1", Data: base64.StdEncoding.EncodeToString([]byte(`{"orderId":"o-1"}`))},
		{MessageID: "ID:broker-1-2", Data: base64.StdEncoding.EncodeToString([]byte(`{"orderId":"o-2"}`))},
	}}
	// In main: lambda.Start(handler)

	fmt.Println(handler(context.Background(), ev))
	fmt.Println(handler(context.Background(), ev)) // delivered again: nothing runs twice
	// Output:
	// shipping o-1
	// shipping o-2
	// <nil>
	// <nil>
}
