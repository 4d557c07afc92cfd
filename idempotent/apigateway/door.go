package apigateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// door is what HandlerV1 and HandlerV2 share, as aws-lambda-go's lambdaurl
// does for Function URLs: translate the event into an *http.Request whose
// context carries the event and its caller's scope (for nethttp.Middleware,
// with nethttp.ContextWithScope), serve it with h, translate what h wrote
// back into the event response. Nothing is called back.
type door[Req, Resp any] struct {
	payload[Req, Resp]
	h       http.Handler
	callers *callers
	// log is where refused events and panics are logged: slog.Default()
	// for HandlerV1 and HandlerV2, the Engine's for WrapV1 and WrapV2.
	log func() *slog.Logger
	// refused, if set, reports an event refused without a method
	// (WrapV1 and WrapV2 tell their Engine).
	refused func(ctx context.Context, err error)
}

// payload is one payload format version's translations.
type payload[Req, Resp any] struct {
	// request is the event as an HTTP request, with ctx, its URL and body
	// reader in room; errNoMethod if the event has no method.
	request func(ctx context.Context, room *requestRoom, ev *Req) (*http.Request, error)
	// response is what the handler wrote, as the event response.
	response func(rec *recorder) Resp
	// caller is the scope the event's authorizer names, and the context of
	// the Lambda authorizer that authorized it (nil when none did).
	caller func(ev *Req) (scope string, lambdaAuth map[string]any)
}

// invocation is one event on its way through a door: the request's context
// carries it, for RequestV1FromContext and RequestV2FromContext (and the
// typed handler of WrapV1 and WrapV2, which keeps its response here).
type invocation[Req, Resp any] struct {
	ev   Req         // the event, copied here: one allocation for all of it
	rec  recorder    // what the handler wrote
	room requestRoom // the request's URL and body reader

	// WrapV1 and WrapV2 only: the typed handler's response once it
	// returned one, and what it was written as.
	out   Resp
	done  bool
	wrote written
}

type invocationKey struct{}

type (
	invocationV1 = invocation[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]
	invocationV2 = invocation[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]
)

// RequestV1FromContext returns the REST API (payload format 1.0) event that
// HandlerV1 (or WrapV1) translated into the request whose context ctx is, as
// lambdaurl.RequestFromContext does for Function URLs: read its
// authorizer, stage variables or request context there. ok is false for a
// context of any other request.
func RequestV1FromContext(ctx context.Context) (ev *events.APIGatewayProxyRequest, ok bool) {
	inv, ok := ctx.Value(invocationKey{}).(*invocationV1)
	if !ok {
		return nil, false
	}
	return &inv.ev, true
}

// RequestV2FromContext returns the HTTP API (payload format 2.0) event that
// HandlerV2 (or WrapV2) translated into the request whose context ctx is,
// as lambdaurl.RequestFromContext does for Function URLs. ok is false for a
// context of any other request.
func RequestV2FromContext(ctx context.Context) (ev *events.APIGatewayV2HTTPRequest, ok bool) {
	inv, ok := ctx.Value(invocationKey{}).(*invocationV2)
	if !ok {
		return nil, false
	}
	return &inv.ev, true
}

// serve answers inv's event with d.h, into inv.rec, the request scoped to
// the event's caller (or carrying why it cannot be named). It never fails: an
// event without a method is answered 400 malformed-request without running
// the handler, and a panic that leaves the handler (which net/http's server
// would recover, and Lambda does not) is logged and answered 500
// internal-error; panicked reports it.
func (d *door[Req, Resp]) serve(ctx context.Context, inv *invocation[Req, Resp]) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			d.log().LogAttrs(ctx, slog.LevelError, "apigateway: recovered panic",
				slog.String("error", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			inv.rec = recorder{}
			nethttp.Fail(&inv.rec, fmt.Errorf("apigateway: panic: %v", v))
		}
	}()
	scope, shared, scopeErr := d.callers.name(d.caller(&inv.ev))
	rctx := context.WithValue(ctx, invocationKey{}, inv)
	if scopeErr != nil {
		// The middleware answers it if the request has a key; else it runs.
		rctx = nethttp.ContextWithScopeError(rctx, scopeErr)
	} else {
		rctx = nethttp.ContextWithScope(rctx, scope)
	}
	r, err := d.request(rctx, &inv.room, &inv.ev)
	if err != nil {
		d.log().LogAttrs(ctx, slog.LevelError, "apigateway: event without an HTTP method; the handler did not run "+
			"(is the function wrapped for the other payload format version, or invoked with another kind of event?)")
		if d.refused != nil {
			d.refused(ctx, err)
		}
		nethttp.Refuse(&inv.rec, err.Error())
		return false
	}
	if shared && r.Header[nethttp.HeaderIdempotencyKey] != nil {
		d.callers.warnShared(ctx)
	}
	d.h.ServeHTTP(&inv.rec, r)
	return false
}
