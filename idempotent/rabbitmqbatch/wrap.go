package rabbitmqbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// ErrNoMessageID is the error of a message without basicProperties.messageId
// under the default key: RabbitMQ gives a message no ID of its own, and
// nothing else of it stays the same across deliveries that is not also
// shared by other messages. It wraps idempotent.ErrMissingKey. Have
// producers set the message ID, or give WithKey or WithRecordKey.
var ErrNoMessageID = fmt.Errorf("rabbitmqbatch: the message has no basicProperties.messageId; give WithKey or WithRecordKey: %w", idempotent.ErrMissingKey)

// ErrNotDone is matched (errors.Is) by every *BatchError.
var ErrNotDone = errors.New("rabbitmqbatch: messages not done")

// BatchError is the error Wrap's handler returns when a message of the batch
// is not done: Lambda then leaves the whole batch to the broker, which
// delivers it again; the messages done are replayed from their records, not
// run again. It matches ErrNotDone, and ErrNoMessageID when a message failed
// for the lack of a message ID.
type BatchError struct {
	// MessageIDs are the basicProperties.messageId of the messages not done,
	// in processing order ("" for a message without one).
	MessageIDs []string
	noID       bool
}

// Error lists the message IDs not done.
func (e *BatchError) Error() string { return e.whole().Text(pkg, "message", ErrNoMessageID) }

// Unwrap returns ErrNotDone, and ErrNoMessageID when a message had none.
func (e *BatchError) Unwrap() []error { return e.whole().Unwrap(ErrNotDone, ErrNoMessageID) }

func (e *BatchError) whole() batch.WholeBatch {
	return batch.WholeBatch{IDs: e.MessageIDs, NoID: e.noID}
}

// Wrap returns a Lambda handler for Amazon MQ for RabbitMQ batches that
// decodes each message's data (base64, as Lambda delivers it) as JSON into
// T and calls handle once per idempotency key, through e, in order within
// each queue. It returns a *BatchError when a message is not done (see the
// package documentation), nil otherwise.
//
// Data that is not base64 or JSON, is JSON null, does not decode into T, or,
// when T or *T has a method Validate() error, fails validation, makes its
// message a failure without calling handle.
//
// Wrap panics if e or handle is nil, or if an option's function takes
// another type than T (see Option).
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, msg T) error, opts ...Option) func(context.Context, events.RabbitMQEvent) error {
	if handle == nil {
		panic("rabbitmqbatch: Wrap: nil handler")
	}
	src := batch.Source[events.RabbitMQMessage, T]{
		Name:    pkg,
		Noun:    "message",
		Handle:  handle,
		Decode:  decodeJSON[T],
		Payload: func(_ *events.RabbitMQMessage, v T) (any, error) { return v, nil },
		Attrs: func(m *events.RabbitMQMessage) []slog.Attr {
			return []slog.Attr{slog.String("message_id", messageID(m))}
		},
		Context: func(ctx context.Context, m *events.RabbitMQMessage) context.Context {
			return context.WithValue(ctx, messageKey{}, m)
		},
	}
	b := &batcher[T]{}
	src.Key = func(m *events.RabbitMQMessage, v T) (string, error) {
		b.defaultKey.Store(true) // called only when no key option replaced it
		return defaultKey(m, v)
	}
	b.p = batch.New(e, "Wrap", src, batch.Apply(opts))
	return b.handleBatch
}

// MessageFromContext returns the RabbitMQ message being processed. It is set
// in the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a message's outcome.
func MessageFromContext(ctx context.Context) (events.RabbitMQMessage, bool) {
	if m, ok := ctx.Value(messageKey{}).(*events.RabbitMQMessage); ok {
		return *m, true
	}
	return events.RabbitMQMessage{}, false
}

type messageKey struct{}

type batcher[T any] struct {
	p          *batch.Processor[events.RabbitMQMessage, T]
	defaultKey atomic.Bool // the default key (the message ID) is in use
}

func messageID(m *events.RabbitMQMessage) string {
	if m.BasicProperties.MessageID == nil {
		return ""
	}
	return *m.BasicProperties.MessageID
}

// defaultKey is the message ID, set by the producer and kept by the broker
// on redelivery. Without one the message fails rather than being keyed on
// something that changes (the redelivered flag) or that other messages
// share (the body).
func defaultKey[T any](m *events.RabbitMQMessage, _ T) (string, error) {
	if id := messageID(m); id != "" {
		return id, nil
	}
	return "", ErrNoMessageID
}

// handleBatch processes one RabbitMQ event. Lambda has no partial batch
// response for Amazon MQ: the function fails when a message is not done.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.RabbitMQEvent) error {
	// The map has no order: queues are taken in key order ("queue::vhost"),
	// the messages of each in their order.
	var msgs []events.RabbitMQMessage
	var queues []string
	names := slices.Sorted(maps.Keys(ev.MessagesByQueue))
	for _, q := range names {
		for _, m := range ev.MessagesByQueue[q] {
			msgs = append(msgs, m)
			queues = append(queues, q)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	// Queues are independent: they run side by side unless WithParallelism
	// says otherwise.
	order := batch.Order{Stop: true, LaneNoun: "queue", Lane: func(i int, _ string) string { return "queue:" + queues[i] },
		Parallelism: len(names)}
	results := b.p.Run(ctx, msgs, order)
	w := batch.NotDoneBatch(results, func(i int) string { return messageID(&msgs[i]) }, b.defaultKey.Load())
	if w == nil {
		return nil
	}
	return &BatchError{MessageIDs: w.IDs, noID: w.NoID}
}

var (
	errInvalidData    = errors.New("rabbitmqbatch: invalid message data")
	errInvalidMessage = errors.New("rabbitmqbatch: invalid message")
)

// decodeJSON decodes a message's data into T and validates it (see
// batch.DecodeJSON: its errors never quote the data).
func decodeJSON[T any](m *events.RabbitMQMessage) (T, error) {
	return batch.DecodeBase64JSON[T](m.Data, errInvalidData, errInvalidMessage)
}
