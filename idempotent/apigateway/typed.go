package apigateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// typed is the http.Handler that WrapV1 and WrapV2 put behind
// nethttp.Middleware: it calls the typed handler with the event of the
// request and writes its response. A handler error or panic is answered
// with nethttp.Fail, as a value.
type typed[Req, Resp any] struct {
	handler func(context.Context, Req) (Resp, error)
	write   func(w http.ResponseWriter, out *Resp) written
	log     *slog.Logger
}

func (t *typed[Req, Resp]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inv, ok := r.Context().Value(invocationKey{}).(*invocation[Req, Resp])
	if !ok { // not a request of this package's door: cannot happen, typed is unexported
		nethttp.Fail(w, errors.New("apigateway: a request without its event"))
		return
	}
	out, err := t.call(r.Context(), inv.ev)
	if err != nil {
		nethttp.Fail(w, err)
		return
	}
	inv.out, inv.done = out, true
	inv.wrote = t.write(w, &inv.out)
}

// call runs the handler, logging its failure: its error, or its panic
// (with the panic's stack) as an error that wraps the panic's value when it
// is an error.
func (t *typed[Req, Resp]) call(ctx context.Context, ev Req) (out Resp, err error) {
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(error); ok {
				err = fmt.Errorf("apigateway: handler panicked: %w", e)
			} else {
				err = fmt.Errorf("apigateway: handler panicked: %v", v)
			}
			t.log.LogAttrs(ctx, slog.LevelError, "apigateway: handler failed",
				slog.String("error", err.Error()), slog.String("stack", string(debug.Stack())))
		}
	}()
	out, err = t.handler(ctx, ev)
	if err != nil {
		t.log.LogAttrs(ctx, slog.LevelError, "apigateway: handler failed", slog.String("error", err.Error()))
	}
	return out, err
}

// wrap is WrapV1 and WrapV2: p's door around nethttp.Middleware around the
// typed handler, scoped to the authorizer's caller (opts may say otherwise).
func wrap[Req, Resp any](e *idempotent.Engine, handler func(context.Context, Req) (Resp, error),
	p payload[Req, Resp], write func(http.ResponseWriter, *Resp) written, opts []Option,
) func(context.Context, Req) (Resp, error) {
	o := newOptions(opts)
	mw := nethttp.Middleware(e, o.http...)
	d := &door[Req, Resp]{payload: p, h: mw(&typed[Req, Resp]{handler: handler, write: write, log: e.Logger()}), log: e.Logger,
		callers: &callers{field: o.field, log: e.Logger},
		refused: func(ctx context.Context, err error) {
			_ = e.Reject(ctx, idempotent.Call{}, fmt.Errorf("%w: %w", idempotent.ErrInvalidPayload, err))
		}}
	return func(ctx context.Context, ev Req) (Resp, error) {
		inv := &invocation[Req, Resp]{ev: ev}
		panicked := d.serve(ctx, inv)
		// The handler's response in its own form, unchanged, when it is what
		// the door answered (or the store failed after it ran); a replay or
		// a problem as the door wrote it.
		if inv.done && (panicked || inv.wrote.answered(&inv.rec)) {
			return inv.out, nil
		}
		return d.response(&inv.rec), nil
	}
}
