package rabbitmqbatch

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// An Option configures Wrap: how a message becomes a key and a payload. The
// core's settings are the idempotent.Engine's.
//
// The options are sqsbatch's, under the same names and rules (see
// sqsbatch.Option): plain values, except WithKey and WithPayloadValidation,
// whose function of the handler's message type makes Wrap panic when it is
// another type than the handler's. WithRecordKey and
// WithRecordPayloadValidation take the events.RabbitMQMessage.
type Option func(*batch.Settings[events.RabbitMQMessage])

const pkg = "rabbitmqbatch"

// WithKey keys a message on the decoded message, replacing the default (its
// basicProperties.messageId), as sqsbatch.WithKey. Give it, or
// WithRecordKey, when producers do not set a message ID.
func WithKey[T any](key func(T) (string, error)) Option {
	return batch.WithKey[events.RabbitMQMessage](pkg, key)
}

// WithRecordKey keys a message on the raw RabbitMQ message (a header, say),
// as sqsbatch.WithRecordKey. Never key on what changes between deliveries,
// such as the redelivered flag.
func WithRecordKey(key func(events.RabbitMQMessage) (string, error)) Option {
	return batch.WithRecordKey(pkg, key)
}

// WithPayloadValidation sets what a duplicate must repeat, from the decoded
// message, as sqsbatch.WithPayloadValidation. The default is the decoded
// message.
func WithPayloadValidation[T any](payload func(T) (any, error)) Option {
	return batch.WithPayloadValidation[events.RabbitMQMessage](pkg, payload)
}

// WithRecordPayloadValidation sets what a duplicate must repeat, from the
// raw RabbitMQ message, as sqsbatch.WithRecordPayloadValidation.
func WithRecordPayloadValidation(payload func(events.RabbitMQMessage) (any, error)) Option {
	return batch.WithRecordPayloadValidation(pkg, payload)
}

// WithoutPayloadValidation turns payload validation off, as
// sqsbatch.WithoutPayloadValidation.
func WithoutPayloadValidation() Option {
	return batch.WithoutPayloadValidation[events.RabbitMQMessage]()
}

// WithParallelism runs up to n queues of a batch at once (default: every
// queue of the batch, side by side); each queue's messages still run one
// after another, in order. With more than one queue at once the handler must
// be safe for concurrent use; WithParallelism(1) runs the queues in turn.
// Values below 1 are raised to 1.
func WithParallelism(n int) Option { return batch.WithParallelism[events.RabbitMQMessage](n) }
