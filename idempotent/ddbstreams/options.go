package ddbstreams

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap: how a record becomes a key and a payload,
// whether a failure stops its lane, and how many lanes run at once. The
// core's settings are the idempotent.Engine's.
//
// The options are sqsbatch's, under the same names and rules (see
// sqsbatch.Option): plain values, ddbstreams.WithParallelism(4), except
// WithKey and WithPayloadValidation, whose function of the handler's
// Change[T] makes Wrap panic when T is another item type than the
// handler's. WithRecordKey and WithRecordPayloadValidation take the
// events.DynamoDBEventRecord.
type Option func(*batch.Settings[events.DynamoDBEventRecord])

const pkg = "ddbstreams"

// WithKey keys a record on the decoded change, replacing the default, the
// record's event ID (which stays the same when Lambda delivers the record
// again), as sqsbatch.WithKey. Key on the item (a payment ID, from
// Change.Key) to run the handler once per item rather than once per change:
// the later changes of the item are then duplicates, done without running
// the handler.
func WithKey[T any](key func(Change[T]) (string, error)) Option {
	return batch.WithKey[events.DynamoDBEventRecord](pkg, key)
}

// WithRecordKey keys a record on the raw stream record, as
// sqsbatch.WithRecordKey.
func WithRecordKey(key func(events.DynamoDBEventRecord) (string, error)) Option {
	return batch.WithRecordKey(pkg, key)
}

// WithPayloadValidation sets what a duplicate must repeat, from the decoded
// change, as sqsbatch.WithPayloadValidation. There is none by default (see
// the package documentation); a mismatch stops the shard until the event
// source mapping's retries run out.
func WithPayloadValidation[T any](payload func(Change[T]) (any, error)) Option {
	return batch.WithPayloadValidation[events.DynamoDBEventRecord](pkg, payload)
}

// WithRecordPayloadValidation sets what a duplicate must repeat, from the
// raw stream record, as sqsbatch.WithRecordPayloadValidation.
func WithRecordPayloadValidation(payload func(events.DynamoDBEventRecord) (any, error)) Option {
	return batch.WithRecordPayloadValidation(pkg, payload)
}

// WithoutPayloadValidation turns payload validation off, as
// sqsbatch.WithoutPayloadValidation: the default here, so it only undoes an
// earlier payload option.
func WithoutPayloadValidation() Option {
	return batch.WithoutPayloadValidation[events.DynamoDBEventRecord]()
}

// WithParallelism runs up to n lanes at once, as sqsbatch.WithParallelism
// (default 1: one record at a time, in shard order). A lane is an item (the
// same primary key): its records still run in order.
func WithParallelism(n int) Option { return batch.WithParallelism[events.DynamoDBEventRecord](n) }

// WithContinueOnFailure processes every record of the batch even after one
// failed, as kinesisbatch.WithContinueOnFailure: the response still names
// the first record not done.
func WithContinueOnFailure() Option {
	return batch.WithContinueOnFailure[events.DynamoDBEventRecord]()
}
