package kafkabatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap and WrapRecord: how a record becomes a key and a
// payload, whether a failure stops its partition, and how many partitions
// run at once. Its type parameter is the handler's value type
// (events.KafkaRecord for WrapRecord), so an option for another type does
// not compile. The core's settings are the idempotent.Engine's.
//
// WithKey and WithPayloadValidation infer the type from their function; the
// others name it: kafkabatch.WithParallelism[Payment](4).
type Option[T any] func(*batch.Options[events.KafkaRecord, T])

// WithKey sets the function that derives a record's idempotency key from the
// decoded value, replacing the default (its topic, partition and offset,
// which stay the same when Lambda delivers the record again). Key on a
// business identifier to catch a producer that sent the same record twice
// (a retried send gets a new offset; an idempotent producer prevents only
// some of these). An error or an empty key makes the record a failure (see
// the package documentation). A nil function panics.
func WithKey[T any](key func(T) (string, error)) Option[T] {
	batch.MustFunc(key == nil, "kafkabatch", "WithKey")
	return func(o *batch.Options[events.KafkaRecord, T]) {
		o.Key = func(_ *events.KafkaRecord, v T) (string, error) { return key(v) }
	}
}

// WithRecordKey is WithKey for a function of the raw Kafka record: to key on
// a header (see Header) or the record key. Name the handler's value type:
// kafkabatch.WithRecordKey[Payment](f). A nil function panics.
func WithRecordKey[T any](key func(events.KafkaRecord) (string, error)) Option[T] {
	batch.MustFunc(key == nil, "kafkabatch", "WithRecordKey")
	return func(o *batch.Options[events.KafkaRecord, T]) {
		o.Key = func(r *events.KafkaRecord, _ T) (string, error) { return key(*r) }
	}
}

// WithPayloadValidation sets the part of a record that must be identical for
// a duplicate (the same key) to count as already processed; a duplicate
// whose payload differs is a failure (idempotent.ErrPayloadMismatch). The
// default is the decoded value for Wrap and the raw key and value for
// WrapRecord; under the default key it never fires. A nil function panics.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option[T] {
	batch.MustFunc(payload == nil, "kafkabatch", "WithPayloadValidation")
	return func(o *batch.Options[events.KafkaRecord, T]) {
		o.Payload = func(_ *events.KafkaRecord, v T) (any, error) { return payload(v) }
		o.NoPayload = false
	}
}

// WithoutPayloadValidation turns payload validation off: a record whose key
// was already processed counts as done whatever its value. Name the
// handler's value type: kafkabatch.WithoutPayloadValidation[Payment]().
func WithoutPayloadValidation[T any]() Option[T] {
	return func(o *batch.Options[events.KafkaRecord, T]) { o.Payload, o.NoPayload = nil, true }
}

// WithParallelism processes up to n topic-partitions of a batch at once
// (default 1). The records of one partition always run one after another,
// in offset order, and records with the same idempotency key never run at
// the same time; with n > 1 the handler must be safe for concurrent use.
// Values below 1 are raised to 1. Name the handler's value type:
// kafkabatch.WithParallelism[Payment](4).
func WithParallelism[T any](n int) Option[T] {
	return func(o *batch.Options[events.KafkaRecord, T]) { o.Parallelism = max(n, 1) }
}

// WithContinueOnFailure processes every record of a partition even after one
// failed, for consumers that do not need order. The response still names
// the partition's first record not done (Lambda resumes the partition there
// and delivers it and every later record again); the later ones that
// succeeded are then replayed, not run again. Name the handler's value type:
// kafkabatch.WithContinueOnFailure[Payment]().
func WithContinueOnFailure[T any]() Option[T] {
	return func(o *batch.Options[events.KafkaRecord, T]) { o.Continue = true }
}
