package sqsbatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/frontdoor"
)

// Wrap returns a Lambda handler for SQS batches that decodes each message body
// as JSON into T and calls handle once per idempotency key, through e,
// reporting the messages that failed as batch item failures. e's store keeps
// the records, and its settings (prefix, expiry, logger, outcome hooks,
// optional keys) apply. The result can be passed to lambda.Start; the event
// source mapping must enable ReportBatchItemFailures (see the package
// documentation).
//
// A body that is not JSON, is JSON null, does not decode into T, or, when T or
// *T has a method Validate() error, fails validation, makes its message a
// failure without affecting the others and without calling handle.
//
// Wrap panics if e or handle is nil.
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, msg T) error, opts ...Option[T]) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if handle == nil {
		panic("sqsbatch: Wrap: nil handler")
	}
	payload := func(_ *events.SQSMessage, v T) (any, error) { return v, nil }
	return newBatcher(e, "Wrap", handle, decodeJSON[T], payload, opts).handleBatch
}

// WrapMessage is Wrap for handlers that take the SQS message itself, for
// bodies that are not JSON or are decoded by the handler. Its default payload
// validation compares the raw body.
func WrapMessage(e *idempotent.Engine, handle func(ctx context.Context, msg events.SQSMessage) error, opts ...Option[events.SQSMessage]) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if handle == nil {
		panic("sqsbatch: WrapMessage: nil handler")
	}
	decode := func(m *events.SQSMessage) (events.SQSMessage, error) { return *m, nil }
	payload := func(m *events.SQSMessage, _ events.SQSMessage) (any, error) { return m.Body, nil }
	return newBatcher(e, "WrapMessage", handle, decode, payload, opts).handleBatch
}

// MessageFromContext returns the SQS message being processed. It is set in
// the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a message's outcome.
func MessageFromContext(ctx context.Context) (events.SQSMessage, bool) {
	if m := messageFrom(ctx); m != nil {
		return *m, true
	}
	return events.SQSMessage{}, false
}

type messageKey struct{}

func messageFrom(ctx context.Context) *events.SQSMessage {
	m, _ := ctx.Value(messageKey{}).(*events.SQSMessage)
	return m
}

// batcher processes SQS batches with one engine call per message.
type batcher[T any] struct {
	engine      frontdoor.Engine
	handle      func(context.Context, T) error
	decode      func(*events.SQSMessage) (T, error)
	key         func(*events.SQSMessage, T) (string, error)
	payload     func(*events.SQSMessage, T) (any, error) // nil: no payload validation
	parallelism int
}

// item is one message of a batch, prepared for processing.
type item[T any] struct {
	msg    *events.SQSMessage
	val    T
	key    string
	keyErr error // the key function failed: reported with frontdoor.Engine.Reject
	err    error // the message cannot be processed at all (invalid body, panic)
}

// hasKey reports whether the item has a usable key to group and lock on.
func (it *item[T]) hasKey() bool { return it.err == nil && it.keyErr == nil && it.key != "" }

// attrs are the log attributes of every line about the item's message, this
// package's and the Engine's (frontdoor.Call.Attrs): its SQS message ID, which ties the
// Engine's lines (they know only the hashed record ID) to a batch item
// failure.
func (it *item[T]) attrs() []slog.Attr {
	return []slog.Attr{slog.String("message_id", it.msg.MessageId)}
}

func newBatcher[T any](e *idempotent.Engine, wrap string, handle func(context.Context, T) error, decode func(*events.SQSMessage) (T, error), defaultPayload func(*events.SQSMessage, T) (any, error), opts []Option[T]) *batcher[T] {
	if e == nil {
		panic("sqsbatch: " + wrap + ": nil Engine")
	}
	o := options[T]{parallelism: 1}
	for _, opt := range opts {
		opt(&o)
	}
	b := &batcher[T]{engine: frontdoor.Of(e), handle: handle, decode: decode, key: o.key, payload: o.payload, parallelism: o.parallelism}
	if b.key == nil {
		b.key = func(m *events.SQSMessage, _ T) (string, error) { return m.MessageId, nil }
	}
	if b.payload == nil && !o.noPayload {
		b.payload = defaultPayload
	}
	return b
}

// doneResponse is what a message's record stores: a message has no
// response, and "{}" is what earlier releases stored (the JSON of struct{}),
// so records written by either read alike.
var doneResponse = []byte("{}")

// nullPayload stands for a payload function's nil result, which is a payload
// (the JSON null) and not the absence of one; idempotent.Wrap hashes it the
// same way.
var nullPayload = []byte("null")

// do runs a message through the engine with its key and payload, the handler
// as the work. ran reports that the handler ran in this call; err is then its
// error (nil when it succeeded, even if its record could not be completed),
// and otherwise the engine's answer (nil for a replay).
func (b *batcher[T]) do(ctx context.Context, it *item[T], attrs []slog.Attr) (ran bool, err error) {
	call := frontdoor.Call{Attrs: attrs}
	if !b.engine.Disabled() { // as idempotent.Wrap: no key or payload errors then
		if it.keyErr != nil {
			return false, b.engine.Reject(ctx, call, fmt.Errorf("%w: %w", idempotent.ErrInvalidKey, it.keyErr))
		}
		call.Key = it.key
		if it.key != "" && b.payload != nil {
			p, err := b.payload(it.msg, it.val)
			if err != nil {
				return false, b.engine.Reject(ctx, call, fmt.Errorf("%w: %w", idempotent.ErrInvalidPayload, err))
			}
			if p == nil {
				p = nullPayload
			}
			call.Payload = p
		}
	}
	res, err := b.engine.Do(ctx, call, func(ctx context.Context) ([]byte, error) {
		return doneResponse, b.run(ctx, it)
	})
	return res.Ran, err
}

// run calls the user's handler. A panic becomes an error here, where the
// stack still shows where it happened; the engine then releases the record
// as for any failure. (runtime.Goexit is not recovered: the engine gives the
// key back, and the message stays failed; see handleBatch.)
func (b *batcher[T]) run(ctx context.Context, it *item[T]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			b.log().LogAttrs(ctx, slog.LevelError, "sqsbatch: handler panicked",
				slog.String("message_id", it.msg.MessageId), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			if perr, isErr := r.(error); isErr { // keep it matchable with errors.Is / As
				err = fmt.Errorf("%w in handler: %w", errPanicked, perr)
			} else {
				err = fmt.Errorf("%w in handler: %v", errPanicked, r)
			}
		}
	}()
	return b.handle(ctx, it.val)
}

// log is the logger of this package's own lines: the Engine's.
func (b *batcher[T]) log() *slog.Logger { return b.engine.Logger() }

var (
	errInvalidBody    = errors.New("sqsbatch: invalid message body")
	errInvalidMessage = errors.New("sqsbatch: invalid message")
	errPanicked       = errors.New("sqsbatch: panic")
)

type validator interface{ Validate() error }

// decodeJSON decodes a body into T and validates it. Its errors never quote
// the body: encoding/json's errors are reduced to offsets, field names and
// types, because the errors of custom unmarshalers (time.Time's among them)
// may quote their input. Errors returned by Validate are kept as written.
func decodeJSON[T any](m *events.SQSMessage) (T, error) {
	var v T
	body := []byte(m.Body)
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return v, fmt.Errorf("%w: JSON null", errInvalidBody)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%w: %s", errInvalidBody, describeJSONError[T](err))
	}
	var err error
	if x, ok := any(v).(validator); ok {
		err = x.Validate()
	} else if x, ok := any(&v).(validator); ok {
		err = x.Validate()
	}
	if err != nil {
		return v, fmt.Errorf("%w: %w", errInvalidMessage, err)
	}
	return v, nil
}

func describeJSONError[T any](err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		// Value is the kind of JSON value, but for numbers that do not fit it
		// goes on with the number itself ("number 1e999").
		kind, _, _ := strings.Cut(typ.Value, " ")
		if typ.Field != "" {
			return fmt.Sprintf("cannot decode a JSON %s into field %s of type %v", kind, typ.Field, typ.Type)
		}
		return fmt.Sprintf("cannot decode a JSON %s into %v", kind, typ.Type)
	default:
		return fmt.Sprintf("cannot decode into %v (%T)", reflect.TypeFor[T](), err)
	}
}
