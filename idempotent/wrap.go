package idempotent

import (
	"context"
	"fmt"
)

// Wrap returns handler made idempotent by e: the first invocation for a key
// runs handler and stores its response in e's store; duplicates get that
// response (or a documented error) without running handler again. The result
// has the same signature as handler, so it can be passed to lambda.Start or
// lambda.StartHandlerFunc, or called directly to make one side effect inside
// a larger handler idempotent.
//
// Without WithKey the key is the SHA-256 of the whole input as JSON; for Lambda event types
// that carry request ids or timestamps that is rarely what you want.
//
// Wrap is the typed layer over an Engine: it derives the key, scope and
// payload from the input (opts), encodes the response with e's codec and
// decodes replays (see ReplayMarker). Wrap panics if e or handler is nil,
// or if the codec cannot give the output type back
// (see WithCodec): programmer errors, found at start-up.
func Wrap[In, Out any](e *Engine, handler func(context.Context, In) (Out, error), opts ...WrapOption[In]) func(context.Context, In) (Out, error) {
	return newWrapper(e, handler, opts).invoke
}

type wrapper[In, Out any] struct {
	e       *Engine
	handler func(context.Context, In) (Out, error)
	binding[In]
	rt *replayCheck // nil for a custom codec; see WithCodec
}

func newWrapper[In, Out any](e *Engine, handler func(context.Context, In) (Out, error), opts []WrapOption[In]) *wrapper[In, Out] {
	switch {
	case e == nil:
		panic("idempotent: Wrap: nil Engine")
	case handler == nil:
		panic("idempotent: Wrap: nil handler")
	}
	w := &wrapper[In, Out]{e: e, handler: handler}
	for _, opt := range opts {
		opt(&w.binding)
	}
	if w.key == nil {
		w.key = func(in In) (string, error) { return wholeInputKey(in) }
	}
	w.rt = newReplayCheck[Out](e.cfg.codec)
	return w
}

// invocation is one call of a wrapped handler, the engine's runner: the
// engine runs it and hands its accept the stored response of a replay.
type invocation[In, Out any] struct {
	w        *wrapper[In, Out]
	in       In
	out      Out   // the handler's response, when it ran
	err      error // the handler's error, when it ran
	replayed Out   // the decoded stored response, on a replay
}

func (w *wrapper[In, Out]) invoke(ctx context.Context, in In) (Out, error) {
	var zero Out
	var call Call
	inv := &invocation[In, Out]{w: w, in: in}
	if !w.e.cfg.disabled {
		key, err := w.key(in)
		if err != nil {
			return zero, w.e.reject(ctx, &Call{}, fmt.Errorf("%w: %w", ErrInvalidKey, err))
		}
		call.Key = key
		if key != "" && w.scope != nil {
			if call.Scope, err = w.scope(ctx, in); err != nil {
				return zero, w.e.reject(ctx, &Call{}, fmt.Errorf("%w: scope: %w", ErrInvalidKey, err))
			}
		}
		if key != "" && w.payload != nil {
			if call.Payload, err = w.payload(in); err != nil {
				return zero, w.e.reject(ctx, &call, fmt.Errorf("%w: %w", ErrInvalidPayload, err))
			}
			if call.Payload == nil {
				call.Payload = nullPayload
			}
		}
	}
	res, err := w.e.do(ctx, &call, inv, funcs{})
	switch {
	case res.ran && inv.err != nil:
		return inv.out, inv.err // the handler's own error, unchanged
	case res.ran:
		return inv.out, err // nil, or ErrResponseEncoding
	case err != nil:
		return zero, err
	}
	out := inv.replayed
	if m, ok := any(&out).(ReplayMarker); ok {
		m.MarkReplayed(res.replay)
	}
	return out, nil
}

// nullPayload stands for a payload function's nil result, which is a payload
// (the JSON null) and not the absence of one.
var nullPayload = []byte("null")

// run runs the handler and encodes its response for the engine. Run
// without idempotency (no record in the context), it only runs the handler.
func (inv *invocation[In, Out]) run(ctx context.Context) ([]byte, error) {
	w := inv.w
	inv.out, inv.err = w.handler(ctx, inv.in)
	if inv.err != nil {
		return nil, inv.err
	}
	if _, stored := ctx.Value(invocationKey{}).(*invocationCtx); !stored {
		return nil, nil
	}
	raw, err := w.marshal(inv.out)
	if err == nil {
		err = w.replayable(inv.out, raw) // a response a replay would not give back equal
	}
	if err != nil {
		return nil, w.e.notStored(err)
	}
	return raw, nil
}

// accept decodes a stored response before the engine replays it.
func (inv *invocation[In, Out]) accept(raw []byte) (err error) {
	inv.replayed, err = inv.w.unmarshal(raw)
	return err
}

// marshal encodes a response. A panic in the codec (a MarshalJSON method,
// say) is an encoding error: the record is then completed without the
// response, not left INPROGRESS for a takeover to run the handler again.
func (w *wrapper[In, Out]) marshal(out Out) (raw []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			raw, err = nil, fmt.Errorf("codec panicked: %v", r)
		}
	}()
	return w.e.cfg.codec.marshal(out)
}

// unmarshal decodes a stored response; a panic in the codec is an error.
func (w *wrapper[In, Out]) unmarshal(raw []byte) (out Out, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero Out
			out, err = zero, fmt.Errorf("codec panicked: %v", r)
		}
	}()
	err = w.e.cfg.codec.unmarshal(raw, &out)
	return out, err
}
