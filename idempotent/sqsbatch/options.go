package sqsbatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap and WrapMessage: how a message becomes a key and a
// payload, and how many messages run at once. Its type parameter is the
// handler's message type (events.SQSMessage for WrapMessage), so an option
// for another type does not compile. The core's settings (prefix, expiry,
// logger, outcome hooks, optional keys, ...) are the idempotent.Engine's,
// given once to idempotent.New.
//
// WithKey and WithPayloadValidation infer the type from their function.
// The others name it: sqsbatch.WithParallelism[Order](4),
// sqsbatch.WithMessageKey[Order](byAttribute).
type Option[T any] func(*options[T])

type options[T any] = batch.Options[events.SQSMessage, T]

// WithKey sets the function that derives a message's idempotency key from the
// decoded message, replacing the default, the SQS message ID. For WrapMessage
// it takes the events.SQSMessage; to key a typed Wrap on the raw message (its
// attributes, say) use WithMessageKey.
//
// Key on a business identifier, such as an order ID, when the same logical
// message can arrive under different message IDs: SNS fan-out and producers
// that retry SendMessage create new messages, and only the message ID of a
// redelivery stays the same. An error or an empty key makes the message a
// failure (see the package documentation). A nil function panics.
func WithKey[T any](key func(T) (string, error)) Option[T] {
	mustFunc(key == nil, "WithKey")
	return func(o *options[T]) { o.Key = func(_ *events.SQSMessage, v T) (string, error) { return key(v) } }
}

// WithMessageKey is WithKey for a function of the raw SQS message, for a
// handler of any message type: to key on a message attribute rather than
// the body, say. Name the handler's message type:
// sqsbatch.WithMessageKey[Order](byAttribute). A nil function panics.
func WithMessageKey[T any](key func(events.SQSMessage) (string, error)) Option[T] {
	mustFunc(key == nil, "WithMessageKey")
	return func(o *options[T]) { o.Key = func(m *events.SQSMessage, _ T) (string, error) { return key(*m) } }
}

// WithPayloadValidation sets the part of a message that must be identical for
// a duplicate (the same key) to count as already processed; a duplicate whose
// payload differs is a failure (idempotent.ErrPayloadMismatch) rather than
// being silently dropped. It takes the decoded message (the events.SQSMessage
// for WrapMessage; see WithMessagePayloadValidation for the raw message of a
// typed Wrap); the returned value is hashed as described at
// idempotent.WithPayloadValidation. A nil function panics.
//
// The default is the whole decoded message for Wrap (so fields the handler
// does not decode are ignored) and the raw body for WrapMessage. Narrow it when
// duplicates legitimately differ, for example to the inner message of an SNS
// envelope, whose Timestamp and MessageId change when a producer republishes.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option[T] {
	mustFunc(payload == nil, "WithPayloadValidation")
	return func(o *options[T]) {
		o.Payload = func(_ *events.SQSMessage, v T) (any, error) { return payload(v) }
		o.NoPayload = false
	}
}

// WithMessagePayloadValidation is WithPayloadValidation for a function of the
// raw SQS message, for a handler of any message type. Name the handler's
// message type: sqsbatch.WithMessagePayloadValidation[Order](f). A nil
// function panics.
func WithMessagePayloadValidation[T any](payload func(events.SQSMessage) (any, error)) Option[T] {
	mustFunc(payload == nil, "WithMessagePayloadValidation")
	return func(o *options[T]) {
		o.Payload = func(m *events.SQSMessage, _ T) (any, error) { return payload(*m) }
		o.NoPayload = false
	}
}

// WithoutPayloadValidation turns payload validation off: a message whose key
// was already processed counts as done whatever its body. Name the handler's
// message type: sqsbatch.WithoutPayloadValidation[Order]().
func WithoutPayloadValidation[T any]() Option[T] {
	return func(o *options[T]) { o.Payload, o.NoPayload = nil, true }
}

// WithParallelism processes up to n messages of a batch at once (default 1).
// Messages with the same key never run at the same time, and on a FIFO queue
// the messages of one message group always run one after another, in order;
// n bounds how many keys (standard queue) or message groups (FIFO) are worked
// on at once, and with n > 1 the handler must be safe for concurrent use.
// Values below 1 are raised to 1. Name the handler's message type:
// sqsbatch.WithParallelism[Order](4).
func WithParallelism[T any](n int) Option[T] {
	return func(o *options[T]) { o.Parallelism = max(n, 1) }
}

// mustFunc panics on a nil function given to an option: a programmer error,
// found at start-up.
func mustFunc(isNil bool, option string) { batch.MustFunc(isNil, "sqsbatch", option) }
