package kinesisbatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap and WrapRecord: how a record becomes a key and a
// payload, whether a failure stops its lane, and how many lanes run at once.
// The core's settings are the idempotent.Engine's.
//
// The options are sqsbatch's, under the same names and rules (see
// sqsbatch.Option): plain values, kinesisbatch.WithParallelism(4), except
// WithKey and WithPayloadValidation, whose function of the handler's record
// type makes Wrap panic when it is another type than the handler's.
// WithRecordKey and WithRecordPayloadValidation take the
// events.KinesisEventRecord.
type Option func(*batch.Settings[events.KinesisEventRecord])

const pkg = "kinesisbatch"

// WithKey keys a record on the decoded record, replacing the default (the
// stream and the event ID, which stay the same when Lambda delivers the
// record again), as sqsbatch.WithKey. Key on a business identifier, such as
// a payment ID, to catch a producer that put the same record twice (a
// PutRecord retried after a timeout creates a new sequence number).
func WithKey[T any](key func(T) (string, error)) Option {
	return batch.WithKey[events.KinesisEventRecord](pkg, key)
}

// WithRecordKey keys a record on the raw Kinesis record (its partition key,
// say), as sqsbatch.WithRecordKey.
func WithRecordKey(key func(events.KinesisEventRecord) (string, error)) Option {
	return batch.WithRecordKey(pkg, key)
}

// WithPayloadValidation sets what a duplicate must repeat, from the decoded
// record, as sqsbatch.WithPayloadValidation. The default is the decoded
// record for Wrap and the raw data for WrapRecord; under the default key it
// never fires.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option {
	return batch.WithPayloadValidation[events.KinesisEventRecord](pkg, payload)
}

// WithRecordPayloadValidation sets what a duplicate must repeat, from the
// raw Kinesis record, as sqsbatch.WithRecordPayloadValidation.
func WithRecordPayloadValidation(payload func(events.KinesisEventRecord) (any, error)) Option {
	return batch.WithRecordPayloadValidation(pkg, payload)
}

// WithoutPayloadValidation turns payload validation off, as
// sqsbatch.WithoutPayloadValidation.
func WithoutPayloadValidation() Option {
	return batch.WithoutPayloadValidation[events.KinesisEventRecord]()
}

// WithParallelism runs up to n lanes at once, as sqsbatch.WithParallelism
// (default 1: one record at a time, in shard order). A lane is a partition
// key of a shard: its records still run in order.
func WithParallelism(n int) Option { return batch.WithParallelism[events.KinesisEventRecord](n) }

// WithContinueOnFailure processes every record of the batch even after one
// failed, for consumers that do not need order. The response still names
// the first record not done of each shard (Lambda checkpoints there and
// delivers it and every later record again); the later ones that succeeded
// are then replayed from their entries, not run again. kafkabatch and
// ddbstreams have this option too, with this rule.
func WithContinueOnFailure() Option { return batch.WithContinueOnFailure[events.KinesisEventRecord]() }
