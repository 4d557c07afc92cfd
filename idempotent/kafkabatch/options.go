package kafkabatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap and WrapRecord: how a record becomes a key and a
// payload, whether a failure stops its partition, and how many partitions
// run at once. The core's settings are the idempotent.Engine's.
//
// The options are sqsbatch's, under the same names and rules (see
// sqsbatch.Option): plain values, kafkabatch.WithParallelism(4), except
// WithKey and WithPayloadValidation, whose function of the handler's value
// type makes Wrap panic when it is another type than the handler's.
// WithRecordKey and WithRecordPayloadValidation take the events.KafkaRecord.
type Option func(*batch.Settings[events.KafkaRecord])

const pkg = "kafkabatch"

// WithKey keys a record on the decoded value, replacing the default (its
// topic, partition and offset, which stay the same when Lambda delivers the
// record again), as sqsbatch.WithKey. Key on a business identifier to catch
// a producer that sent the same record twice (a retried send gets a new
// offset; an idempotent producer prevents only some of these).
func WithKey[T any](key func(T) (string, error)) Option {
	return batch.WithKey[events.KafkaRecord](pkg, key)
}

// WithRecordKey keys a record on the raw Kafka record: a header (see Header)
// or the record key, as sqsbatch.WithRecordKey.
func WithRecordKey(key func(events.KafkaRecord) (string, error)) Option {
	return batch.WithRecordKey(pkg, key)
}

// WithPayloadValidation sets what a duplicate must repeat, from the decoded
// value, as sqsbatch.WithPayloadValidation. The default is the decoded value
// for Wrap and the raw key and value for WrapRecord; under the default key
// it never fires.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option {
	return batch.WithPayloadValidation[events.KafkaRecord](pkg, payload)
}

// WithRecordPayloadValidation sets what a duplicate must repeat, from the
// raw Kafka record, as sqsbatch.WithRecordPayloadValidation.
func WithRecordPayloadValidation(payload func(events.KafkaRecord) (any, error)) Option {
	return batch.WithRecordPayloadValidation(pkg, payload)
}

// WithoutPayloadValidation turns payload validation off, as
// sqsbatch.WithoutPayloadValidation.
func WithoutPayloadValidation() Option { return batch.WithoutPayloadValidation[events.KafkaRecord]() }

// WithParallelism runs up to n lanes at once, as sqsbatch.WithParallelism
// (default 1). A lane is a topic-partition: its records always run in
// offset order.
func WithParallelism(n int) Option { return batch.WithParallelism[events.KafkaRecord](n) }

// WithContinueOnFailure processes every record of a partition even after one
// failed, as kinesisbatch.WithContinueOnFailure: the response still names
// the partition's first record not done.
func WithContinueOnFailure() Option { return batch.WithContinueOnFailure[events.KafkaRecord]() }
