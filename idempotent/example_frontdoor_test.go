package idempotent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
)

// snsDoor is a front door of its own, written with the exported API only: an
// SNS subscriber whose key is the message id (SNS redelivers with the same
// id) and whose payload is the message, so a different message under an old
// id is refused instead of answered with another's result.
type snsDoor struct {
	engine  *idempotent.Engine
	process func(ctx context.Context, message string) (string, error)
}

func (d snsDoor) handle(ctx context.Context, event events.SNSEvent) ([]string, error) {
	var results []string
	for _, rec := range event.Records {
		msg := rec.SNS
		if !json.Valid([]byte(msg.Message)) {
			// Refused before the engine: the outcome hook still sees it.
			return nil, d.engine.Reject(ctx, idempotent.Call{Key: msg.MessageID}, fmt.Errorf("message %s: not JSON", msg.MessageID))
		}
		call := idempotent.Call{
			Key:     msg.MessageID,
			Scope:   msg.TopicArn, // the same id on two topics names two records
			Payload: json.RawMessage(msg.Message),
			Attrs:   []slog.Attr{slog.String("message_id", msg.MessageID)},
		}
		res, err := d.engine.Do(ctx, call, func(ctx context.Context) ([]byte, error) {
			out, err := d.process(ctx, msg.Message)
			return []byte(out), err // the engine stores bytes; encode as you like
		})
		if err != nil {
			return nil, err // SNS retries; the record was given back
		}
		results = append(results, fmt.Sprintf("%s (ran: %t)", res.Response, res.Ran))
	}
	return results, nil
}

// A front door of your own calls Engine.Do with what it parsed from its
// event: here, SNS notifications, one record per message id.
func ExampleEngine_Do() {
	sent := 0
	door := snsDoor{
		engine: idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("sns-receipts")),
		process: func(ctx context.Context, message string) (string, error) {
			sent++
			return fmt.Sprintf("receipt %d", sent), nil
		},
	}
	notification := func(id, message string) events.SNSEvent {
		return events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
			MessageID: id, TopicArn: "arn:aws:sns:us-east-1:000000000000:orders", Message: message,
		}}}}
	}
	// In a Lambda function: lambda.Start(door.handle)

	first, _ := door.handle(context.Background(), notification("m-1", `{"order":"o-1"}`))
	redelivered, _ := door.handle(context.Background(), notification("m-1", `{"order":"o-1"}`))
	_, err := door.handle(context.Background(), notification("m-1", `{"order":"o-2"}`))
	fmt.Println(first[0])
	fmt.Println(redelivered[0])
	fmt.Println(errors.Is(err, idempotent.ErrPayloadMismatch), sent)
	// Output:
	// receipt 1 (ran: true)
	// receipt 1 (ran: false)
	// true 1
}
