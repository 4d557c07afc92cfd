package sqsbatch

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
)

// An Option configures Wrap and WrapMessage. Options that take a function of
// the message are generic; their type is checked once, when wrapping.
type Option func(*options)

type options struct {
	key         any // func(T) (string, error) or func(events.SQSMessage) (string, error)
	payload     any // func(T) (any, error) or func(events.SQSMessage) (any, error)
	noPayload   bool
	parallelism int
	logger      *slog.Logger
	hook        func(context.Context, idempotent.Event)
	core        []idempotent.Option
}

// WithKey sets the function that derives a message's idempotency key,
// replacing the default, the SQS message ID. In must be the wrapped handler's
// message type or events.SQSMessage (to key on attributes rather than the
// body).
//
// Key on a business identifier, such as an order ID, when the same logical
// message can arrive under different message IDs: SNS fan-out and producers
// that retry SendMessage create new messages, and only the message ID of a
// redelivery stays the same. An error or an empty key makes the message a
// failure (see the package documentation).
func WithKey[In any](key func(In) (string, error)) Option {
	return func(o *options) { o.key = key }
}

// WithPayloadValidation sets the part of a message that must be identical for
// a duplicate (the same key) to count as already processed; a duplicate whose
// payload differs is a failure (idempotent.ErrPayloadMismatch) rather than
// being silently dropped. In must be the wrapped handler's message type or
// events.SQSMessage; the returned value is hashed as described at
// idempotent.WithPayloadValidation.
//
// The default is the whole decoded message for Wrap (so fields the handler
// does not decode are ignored) and the raw body for WrapMessage. Narrow it when
// duplicates legitimately differ, for example to the inner message of an SNS
// envelope, whose Timestamp and MessageId change when a producer republishes.
func WithPayloadValidation[In any](payload func(In) (any, error)) Option {
	return func(o *options) { o.payload, o.noPayload = payload, false }
}

// WithoutPayloadValidation turns payload validation off: a message whose key
// was already processed counts as done whatever its body.
func WithoutPayloadValidation() Option {
	return func(o *options) { o.payload, o.noPayload = nil, true }
}

// WithParallelism processes up to n messages of a batch at once (default 1).
// Messages with the same key never run at the same time, and on a FIFO queue
// the messages of one message group always run one after another, in order;
// n bounds how many keys (standard queue) or message groups (FIFO) are worked
// on at once, and with n > 1 the handler must be safe for concurrent use.
// Values below 1 are raised to 1.
func WithParallelism(n int) Option {
	return func(o *options) { o.parallelism = max(n, 1) }
}

// WithLogger sets the logger of this package and of the engine under it
// (default slog.Default(), as it is when a record is written). Every record
// carries the SQS message ID as "message_id"; none carries a message body or
// idempotency key. It wins over an idempotent.WithLogger given to
// [WithIdempotentOptions], which states the rule. A nil logger is the same as
// none.
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.logger = logger }
}

// WithOutcomeHook calls hook once per message with its outcome, for metrics
// (for example emf.Metrics.Hook): the core's outcomes, and OutcomeRejected
// (with an error wrapping idempotent.ErrInvalidPayload) for a message whose
// body cannot be decoded or fails Validate, which never reaches the core. The
// hook's context carries the message (see MessageFromContext). Messages not
// started because the invocation's time ran out, or held back behind a failed
// message of their FIFO group, report no outcome: they did not run. It wins
// over an idempotent.WithOutcomeHook given to [WithIdempotentOptions], which
// states the rule. A nil hook is the same as none.
func WithOutcomeHook(hook func(context.Context, idempotent.Event)) Option {
	return func(o *options) { o.hook = hook }
}

// WithIdempotentOptions passes options to the idempotent.Engine that runs each
// message, for example idempotent.WithPrefix, idempotent.WithExpiry,
// idempotent.WithLocalCache, idempotent.WithWaitInProgress or
// idempotent.WithOptionalKey.
//
// The logger and the outcome hook can be given at both layers; one rule
// decides which applies: this package's defaults first (slog.Default, with
// "message_id" added to the core's records; no hook), then the options given
// to WithIdempotentOptions, in order, then this package's own options. So
// WithLogger wins over idempotent.WithLogger, and WithOutcomeHook over
// idempotent.WithOutcomeHook, in whatever order they are given. Given here
// without its counterpart, idempotent.WithLogger replaces the logger of the
// core's records only (which then lack "message_id"), and
// idempotent.WithOutcomeHook sees the core's outcomes only, not the messages
// this package rejects before the core (bodies it cannot decode); the
// hook's context carries the message all the same (see MessageFromContext).
//
// The options that need a typed front door, idempotent.WithKey,
// idempotent.WithScope, idempotent.WithPayloadValidation and
// idempotent.WithReplayHook, make Wrap panic, as they make
// idempotent.NewEngine panic: this package derives the key and the payload
// itself; use its WithKey and WithPayloadValidation. idempotent.WithCodec has
// no effect, as a message has no response to encode.
func WithIdempotentOptions(opts ...idempotent.Option) Option {
	return func(o *options) { o.core = append(o.core, opts...) }
}

// msgFunc adapts a generic option's function, given for the message type T or
// for events.SQSMessage, to one taking both. It panics, at wrap time, on any
// other type or a nil function.
func msgFunc[T, R any](v any, option string) func(*events.SQSMessage, T) (R, error) {
	switch f := v.(type) {
	case nil:
		return nil
	case func(T) (R, error): // chosen first when T is events.SQSMessage
		if f == nil {
			panic("sqsbatch: " + option + ": nil function")
		}
		return func(_ *events.SQSMessage, v T) (R, error) { return f(v) }
	case func(events.SQSMessage) (R, error):
		if f == nil {
			panic("sqsbatch: " + option + ": nil function")
		}
		return func(m *events.SQSMessage, _ T) (R, error) { return f(*m) }
	default:
		panic(fmt.Sprintf("sqsbatch: %s: got %T, want %v or %v", option, v,
			reflect.TypeFor[func(T) (R, error)](), reflect.TypeFor[func(events.SQSMessage) (R, error)]()))
	}
}
