package sqsbatch

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// Wrap returns a Lambda handler for SQS batches that decodes each message body
// as JSON into T and calls handle once per idempotency key, through e,
// reporting the messages that failed as batch item failures. e's store keeps
// the records, and its settings (prefix, expiry, logger, outcome hooks,
// optional keys) apply. The result can be passed to lambda.Start; the event
// source mapping must enable ReportBatchItemFailures (see the package
// documentation).
//
// A body that is not JSON, is JSON null, does not decode into T, or, when T or
// *T has a method Validate() error, fails validation, makes its message a
// failure without affecting the others and without calling handle.
//
// Wrap panics if e or handle is nil, or if an option's function takes
// another type than T (see Option).
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, msg T) error, opts ...Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if handle == nil {
		panic("sqsbatch: Wrap: nil handler")
	}
	payload := func(_ *events.SQSMessage, v T) (any, error) { return v, nil }
	return newBatcher(e, "Wrap", handle, decodeJSON[T], payload, opts).handleBatch
}

// WrapMessage is Wrap for handlers that take the SQS message itself, for
// bodies that are not JSON or are decoded by the handler. Its default payload
// validation compares the raw body. The functions given to WithKey and
// WithPayloadValidation take the events.SQSMessage.
func WrapMessage(e *idempotent.Engine, handle func(ctx context.Context, msg events.SQSMessage) error, opts ...Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if handle == nil {
		panic("sqsbatch: WrapMessage: nil handler")
	}
	decode := func(m *events.SQSMessage) (events.SQSMessage, error) { return *m, nil }
	payload := func(m *events.SQSMessage, _ events.SQSMessage) (any, error) { return m.Body, nil }
	return newBatcher(e, "WrapMessage", handle, decode, payload, opts).handleBatch
}

// MessageFromContext returns the SQS message being processed. It is set in
// the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a message's outcome.
func MessageFromContext(ctx context.Context) (events.SQSMessage, bool) {
	if m := messageFrom(ctx); m != nil {
		return *m, true
	}
	return events.SQSMessage{}, false
}

type messageKey struct{}

func messageFrom(ctx context.Context) *events.SQSMessage {
	m, _ := ctx.Value(messageKey{}).(*events.SQSMessage)
	return m
}

// batcher processes SQS batches with one engine call per message.
type batcher[T any] struct {
	p *batch.Processor[events.SQSMessage, T]
}

func newBatcher[T any](e *idempotent.Engine, wrap string, handle func(context.Context, T) error, decode func(*events.SQSMessage) (T, error), defaultPayload func(*events.SQSMessage, T) (any, error), opts []Option) *batcher[T] {
	src := batch.Source[events.SQSMessage, T]{
		Name:    "sqsbatch",
		Noun:    "message",
		Handle:  handle,
		Decode:  decode,
		Key:     func(m *events.SQSMessage, _ T) (string, error) { return m.MessageId, nil },
		Payload: defaultPayload,
		// The SQS message ID ties the Engine's lines (they know only the
		// hashed record ID) to a batch item failure.
		Attrs: func(m *events.SQSMessage) []slog.Attr { return []slog.Attr{slog.String("message_id", m.MessageId)} },
		Context: func(ctx context.Context, m *events.SQSMessage) context.Context {
			return context.WithValue(ctx, messageKey{}, m)
		},
	}
	return &batcher[T]{p: batch.New(e, wrap, src, batch.Apply(opts))}
}

var (
	errInvalidBody    = errors.New("sqsbatch: invalid message body")
	errInvalidMessage = errors.New("sqsbatch: invalid message")
)

// decodeJSON decodes a body into T and validates it (see batch.DecodeJSON:
// its errors never quote the body).
func decodeJSON[T any](m *events.SQSMessage) (T, error) {
	return batch.DecodeJSON[T]([]byte(m.Body), errInvalidBody, errInvalidMessage)
}
