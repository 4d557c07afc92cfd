package kinesisbatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap and WrapRecord: how a record becomes a key and a
// payload, whether a failure stops the shard, and how many records run at
// once. Its type parameter is the handler's record type
// (events.KinesisEventRecord for WrapRecord), so an option for another type
// does not compile. The core's settings are the idempotent.Engine's.
//
// WithKey and WithPayloadValidation infer the type from their function; the
// others name it: kinesisbatch.WithParallelism[Payment](4).
type Option[T any] func(*batch.Options[events.KinesisEventRecord, T])

// WithKey sets the function that derives a record's idempotency key from the
// decoded record, replacing the default (the stream and the event ID, which
// stay the same when Lambda delivers the record again). Key on a business
// identifier, such as a payment ID, to catch a producer that put the same
// record twice (a PutRecord retried after a timeout creates a new sequence
// number). An error or an empty key makes the record a failure (see the
// package documentation). A nil function panics.
func WithKey[T any](key func(T) (string, error)) Option[T] {
	batch.MustFunc(key == nil, "kinesisbatch", "WithKey")
	return func(o *batch.Options[events.KinesisEventRecord, T]) {
		o.Key = func(_ *events.KinesisEventRecord, v T) (string, error) { return key(v) }
	}
}

// WithRecordKey is WithKey for a function of the raw Kinesis record (its
// partition key, say), for a handler of any record type. Name the handler's
// record type: kinesisbatch.WithRecordKey[Payment](f). A nil function panics.
func WithRecordKey[T any](key func(events.KinesisEventRecord) (string, error)) Option[T] {
	batch.MustFunc(key == nil, "kinesisbatch", "WithRecordKey")
	return func(o *batch.Options[events.KinesisEventRecord, T]) {
		o.Key = func(r *events.KinesisEventRecord, _ T) (string, error) { return key(*r) }
	}
}

// WithPayloadValidation sets the part of a record that must be identical for
// a duplicate (the same key) to count as already processed; a duplicate
// whose payload differs is a failure (idempotent.ErrPayloadMismatch). The
// default is the decoded record for Wrap and the raw data for WrapRecord;
// under the default key it never fires. A nil function panics.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option[T] {
	batch.MustFunc(payload == nil, "kinesisbatch", "WithPayloadValidation")
	return func(o *batch.Options[events.KinesisEventRecord, T]) {
		o.Payload = func(_ *events.KinesisEventRecord, v T) (any, error) { return payload(v) }
		o.NoPayload = false
	}
}

// WithoutPayloadValidation turns payload validation off: a record whose key
// was already processed counts as done whatever its data. Name the handler's
// record type: kinesisbatch.WithoutPayloadValidation[Payment]().
func WithoutPayloadValidation[T any]() Option[T] {
	return func(o *batch.Options[events.KinesisEventRecord, T]) { o.Payload, o.NoPayload = nil, true }
}

// WithParallelism processes the records of up to n partition keys at once
// (default 1: one record at a time, in shard order). The records of one
// partition key still run one after another, in order, and records with the
// same idempotency key never run at the same time; with n > 1 the handler
// must be safe for concurrent use. Values below 1 are raised to 1. Name the
// handler's record type: kinesisbatch.WithParallelism[Payment](4).
func WithParallelism[T any](n int) Option[T] {
	return func(o *batch.Options[events.KinesisEventRecord, T]) { o.Parallelism = max(n, 1) }
}

// WithContinueOnFailure processes every record of the batch even after one
// failed, for consumers that do not need order. The response still names
// the first record not done (Lambda checkpoints there and delivers it and
// every later record again); the later ones that succeeded are then
// replayed from their records, not run again. Name the handler's record
// type: kinesisbatch.WithContinueOnFailure[Payment]().
func WithContinueOnFailure[T any]() Option[T] {
	return func(o *batch.Options[events.KinesisEventRecord, T]) { o.Continue = true }
}
