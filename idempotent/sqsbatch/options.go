package sqsbatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap and WrapMessage: how a message becomes a key and a
// payload, and how many messages run at once. The core's settings (prefix,
// expiry, logger, outcome hooks, optional keys, ...) are the
// idempotent.Engine's, given once to idempotent.New.
//
// Options are plain values: sqsbatch.WithParallelism(4). WithKey and
// WithPayloadValidation take a function of the handler's message type (its
// type argument is inferred from the function); Wrap panics when it is
// another type than the handler's, a programmer error found at start-up.
// WithRecordKey and WithRecordPayloadValidation take the events.SQSMessage,
// for a handler of any type.
//
// These options, which kinesisbatch, kafkabatch and ddbstreams share under
// the same names, are documented here; those packages state only what is
// their own.
type Option func(*options)

type options = batch.Settings[events.SQSMessage]

const pkg = "sqsbatch"

// WithKey sets the function that derives a message's idempotency key from the
// decoded message (the events.SQSMessage for WrapMessage), replacing the
// default, the SQS message ID; WithRecordKey takes the raw message instead.
// The last key option given wins.
//
// Key on a business identifier, such as an order ID, when the same logical
// message can arrive under different message IDs: SNS fan-out and producers
// that retry SendMessage create new messages, and only the message ID of a
// redelivery stays the same. An error or an empty key (unless
// idempotent.WithOptionalKey) makes the message a failure, reported to the
// Engine's outcome hooks as a rejection (idempotent.ErrInvalidKey); a panic
// fails that message only. A nil function panics; a function of another type
// than the handler's makes Wrap panic.
func WithKey[T any](key func(T) (string, error)) Option {
	return batch.WithKey[events.SQSMessage](pkg, key)
}

// WithRecordKey is WithKey for a function of the raw SQS message, for a
// handler of any message type: to key on a message attribute rather than the
// body, say. A nil function panics.
func WithRecordKey(key func(events.SQSMessage) (string, error)) Option {
	return batch.WithRecordKey(pkg, key)
}

// WithPayloadValidation sets the part of a message that must be identical for
// a duplicate (the same key) to count as already processed; a duplicate whose
// payload differs is a failure (idempotent.ErrPayloadMismatch) rather than
// being silently dropped, and an error of the function fails the message
// (idempotent.ErrInvalidPayload). It takes the decoded message (the
// events.SQSMessage for WrapMessage); WithRecordPayloadValidation takes the
// raw message. The returned value is hashed as described at
// idempotent.WithPayloadValidation. The last payload option given wins. A nil
// function panics; a function of another type than the handler's makes Wrap
// panic.
//
// The default is the whole decoded message for Wrap (so fields the handler
// does not decode are ignored) and the raw body for WrapMessage. Narrow it when
// duplicates legitimately differ, for example to the inner message of an SNS
// envelope, whose Timestamp and MessageId change when a producer republishes.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option {
	return batch.WithPayloadValidation[events.SQSMessage](pkg, payload)
}

// WithRecordPayloadValidation is WithPayloadValidation for a function of the
// raw SQS message, for a handler of any message type. A nil function panics.
func WithRecordPayloadValidation(payload func(events.SQSMessage) (any, error)) Option {
	return batch.WithRecordPayloadValidation(pkg, payload)
}

// WithoutPayloadValidation turns payload validation off: a message whose key
// was already processed counts as done whatever its body.
func WithoutPayloadValidation() Option { return batch.WithoutPayloadValidation[events.SQSMessage]() }

// WithParallelism processes up to n lanes of a batch at once. A lane holds
// the messages of one key on a standard queue, of one message group on a
// FIFO queue; its messages run one after another, in batch order, and
// messages with the same key never run at the same time, in one lane or
// across lanes. By default a standard queue's batch runs up to 10 lanes at
// once (a standard queue keeps no order) and a FIFO queue's one at a time;
// WithParallelism(1) runs a standard queue's messages one by one. With more
// than one lane at once the handler must be safe for concurrent use.
// Values below 1 are raised to 1.
//
// (SQS has no WithContinueOnFailure: on a standard queue a failure stops
// nothing already, and on a FIFO queue AWS asks that the rest of the group
// be reported with it.)
func WithParallelism(n int) Option { return batch.WithParallelism[events.SQSMessage](n) }
