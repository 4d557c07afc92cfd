package activemqbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// ErrNoMessageID is the error of a message without a messageID under the
// default key (the broker sets one on every JMS message, so this points at
// a malformed event). It wraps idempotent.ErrMissingKey. Give WithKey or
// WithRecordKey to key on something else that stays the same.
var ErrNoMessageID = fmt.Errorf("activemqbatch: the message has no messageID; give WithKey or WithRecordKey: %w", idempotent.ErrMissingKey)

// ErrNotDone is matched (errors.Is) by every *BatchError.
var ErrNotDone = errors.New("activemqbatch: messages not done")

// BatchError is the error Wrap's handler returns when a message of the batch
// is not done: Lambda then leaves the whole batch to the broker, which
// delivers it again; the messages done are replayed from their records, not
// run again. It matches ErrNotDone, and ErrNoMessageID when a message failed
// for the lack of a message ID.
type BatchError struct {
	// MessageIDs are the messageID of the messages not done, in batch order
	// ("" for a message without one).
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

// Wrap returns a Lambda handler for Amazon MQ for ActiveMQ batches that
// decodes each message's data (base64, as Lambda delivers it) as JSON into
// T and calls handle once per idempotency key, through e, in batch order
// within each destination. It returns a *BatchError when a message is not
// done (see the package documentation), nil otherwise.
//
// Data that is not base64 or JSON, is JSON null, does not decode into T, or,
// when T or *T has a method Validate() error, fails validation, makes its
// message a failure without calling handle.
//
// Wrap panics if e or handle is nil, or if an option's function takes
// another type than T (see Option).
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, msg T) error, opts ...Option) func(context.Context, events.ActiveMQEvent) error {
	if handle == nil {
		panic("activemqbatch: Wrap: nil handler")
	}
	b := &batcher[T]{}
	src := batch.Source[events.ActiveMQMessage, T]{
		Name:   pkg,
		Noun:   "message",
		Handle: handle,
		Decode: decodeJSON[T],
		Key: func(m *events.ActiveMQMessage, _ T) (string, error) {
			b.defaultKey.Store(true) // called only when no key option replaced it
			if m.MessageID == "" {
				return "", ErrNoMessageID
			}
			return m.MessageID, nil
		},
		Payload: func(_ *events.ActiveMQMessage, v T) (any, error) { return v, nil },
		Attrs: func(m *events.ActiveMQMessage) []slog.Attr {
			return []slog.Attr{slog.String("message_id", m.MessageID)}
		},
		Context: func(ctx context.Context, m *events.ActiveMQMessage) context.Context {
			return context.WithValue(ctx, messageKey{}, m)
		},
	}
	b.p = batch.New(e, "Wrap", src, batch.Apply(opts))
	return b.handleBatch
}

// MessageFromContext returns the ActiveMQ message being processed. It is set
// in the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a message's outcome.
func MessageFromContext(ctx context.Context) (events.ActiveMQMessage, bool) {
	if m, ok := ctx.Value(messageKey{}).(*events.ActiveMQMessage); ok {
		return *m, true
	}
	return events.ActiveMQMessage{}, false
}

type messageKey struct{}

type batcher[T any] struct {
	p          *batch.Processor[events.ActiveMQMessage, T]
	defaultKey atomic.Bool // the default key (the messageID) is in use
}

// handleBatch processes one ActiveMQ event. Lambda has no partial batch
// response for Amazon MQ: the function fails when a message is not done.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.ActiveMQEvent) error {
	msgs := ev.Messages
	if len(msgs) == 0 {
		return nil
	}
	// An event source mapping reads one queue: one lane, in batch order. The
	// destination still names the lane, in case a batch mixes them.
	order := batch.Order{Stop: true, LaneNoun: "destination", Lane: func(i int, _ string) string {
		return "destination:" + msgs[i].Destination.PhysicalName
	}}
	results := b.p.Run(ctx, msgs, order)
	w := batch.NotDoneBatch(results, func(i int) string { return msgs[i].MessageID }, b.defaultKey.Load())
	if w == nil {
		return nil
	}
	return &BatchError{MessageIDs: w.IDs, noID: w.NoID}
}

var (
	errInvalidData    = errors.New("activemqbatch: invalid message data")
	errInvalidMessage = errors.New("activemqbatch: invalid message")
)

// decodeJSON decodes a message's data into T and validates it (see
// batch.DecodeJSON: its errors never quote the data).
func decodeJSON[T any](m *events.ActiveMQMessage) (T, error) {
	return batch.DecodeBase64JSON[T](m.Data, errInvalidData, errInvalidMessage)
}
