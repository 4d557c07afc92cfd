package ddbstreams

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap: how a record becomes a key and a payload,
// whether a failure stops the shard, and how many records run at once. Its
// type parameter is the item type of the handler's Change, so an option for
// another type does not compile. The core's settings are the
// idempotent.Engine's.
//
// WithKey and WithPayloadValidation infer the type from their function; the
// others name it: ddbstreams.WithParallelism[Payment](4).
type Option[T any] func(*batch.Options[events.DynamoDBEventRecord, Change[T]])

// WithKey sets the function that derives a record's idempotency key from the
// decoded change, replacing the default, the record's event ID (which stays
// the same when Lambda delivers the record again). Key on the item (a
// payment ID) to run the handler once per item rather than once per change:
// the later changes of the item are then duplicates, done without running
// the handler. An error or an empty key makes the record a failure (see the
// package documentation). A nil function panics.
func WithKey[T any](key func(Change[T]) (string, error)) Option[T] {
	batch.MustFunc(key == nil, "ddbstreams", "WithKey")
	return func(o *batch.Options[events.DynamoDBEventRecord, Change[T]]) {
		o.Key = func(_ *events.DynamoDBEventRecord, c Change[T]) (string, error) { return key(c) }
	}
}

// WithRecordKey is WithKey for a function of the raw stream record. Name the
// item type: ddbstreams.WithRecordKey[Payment](f). A nil function panics.
func WithRecordKey[T any](key func(events.DynamoDBEventRecord) (string, error)) Option[T] {
	batch.MustFunc(key == nil, "ddbstreams", "WithRecordKey")
	return func(o *batch.Options[events.DynamoDBEventRecord, Change[T]]) {
		o.Key = func(r *events.DynamoDBEventRecord, _ Change[T]) (string, error) { return key(*r) }
	}
}

// WithPayloadValidation sets the part of a change that must be identical for
// a duplicate (the same key) to count as already processed; a duplicate
// whose payload differs is a failure (idempotent.ErrPayloadMismatch), which
// stops the shard until the event source mapping's retries run out. There
// is none by default (see the package documentation). The returned value is
// hashed as described at idempotent.WithPayloadValidation. A nil function
// panics.
func WithPayloadValidation[T any](payload func(Change[T]) (any, error)) Option[T] {
	batch.MustFunc(payload == nil, "ddbstreams", "WithPayloadValidation")
	return func(o *batch.Options[events.DynamoDBEventRecord, Change[T]]) {
		o.Payload = func(_ *events.DynamoDBEventRecord, c Change[T]) (any, error) { return payload(c) }
		o.NoPayload = false
	}
}

// WithParallelism processes the records of up to n items at once (default
// 1: one record at a time, in shard order). The records of one item (the
// same primary key) still run one after another, in order, and records with
// the same idempotency key never run at the same time; with n > 1 the
// handler must be safe for concurrent use. Values below 1 are raised to 1.
// Name the item type: ddbstreams.WithParallelism[Payment](4).
func WithParallelism[T any](n int) Option[T] {
	return func(o *batch.Options[events.DynamoDBEventRecord, Change[T]]) { o.Parallelism = max(n, 1) }
}

// WithContinueOnFailure processes every record of the batch even after one
// failed, for consumers that do not need order. The response still names
// the first record not done (Lambda checkpoints there and delivers it and
// every later record again); the later ones that succeeded are then
// replayed, not run again. Name the item type:
// ddbstreams.WithContinueOnFailure[Payment]().
func WithContinueOnFailure[T any]() Option[T] {
	return func(o *batch.Options[events.DynamoDBEventRecord, Change[T]]) { o.Continue = true }
}
