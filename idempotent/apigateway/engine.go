package apigateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

// engine is the implementation WrapV1 and WrapV2 share, over the neutral
// request and response types. It is a front door of idempotent.Engine: it
// parses the key, names the caller and fingerprints the request by the rules
// of httprules (shared with the net/http middleware), then makes one core.Do
// call per request; the core calls back only into the work (the handler)
// and into the decoding of a stored response.
type engine struct {
	*httprules.Rules
	callerField string

	sharedScopeWarning sync.Once // see callerScope
}

func newEngine(core *idempotent.Engine, opts []Option) *engine {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return &engine{Rules: httprules.New("apigateway", core, o.Config), callerField: o.callerField}
}

// serve answers one request. It never panics and never fails: every outcome
// is an HTTP response.
func (e *engine) serve(ctx context.Context, req request, handler func(context.Context) (response, error)) (out response) {
	x := &exchange{e: e, handler: handler}
	defer func() {
		// A safety net: handler panics are recovered in run, so this only
		// catches a fault in the adapter or the store. A handler that
		// succeeded still has its response delivered.
		if v := recover(); v != nil {
			e.Log().LogAttrs(ctx, slog.LevelError, "apigateway: recovered panic",
				slog.String("error", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			out = problem(httprules.Internal())
			if x.ran && x.err == nil {
				out = x.original
			}
		}
	}()

	if req.method == "" {
		// Not an API Gateway proxy request (or not of this payload version):
		// without a method the adapter cannot tell whether it needs a key.
		e.Log().LogAttrs(ctx, slog.LevelError, "apigateway: event without an HTTP method; the handler did not run "+
			"(is the function wrapped for the other payload format version, or invoked with another kind of event?)")
		return e.refuse(ctx, idempotent.Call{}, errNoMethod)
	}
	if !e.NeedsKey(req.method) {
		x.run(ctx)
		return e.ranResult(ctx, &req, x)
	}
	if err := e.callerScope(ctx, &req); err != nil {
		e.Log().LogAttrs(ctx, slog.LevelError, "apigateway: cannot name the caller; the handler did not run",
			slog.String("method", req.method), slog.String("error", err.Error()))
		return problem(httprules.Internal())
	}

	var call idempotent.Call
	if !e.Disabled {
		key, err := httprules.ParseKey(req.keyValues)
		if err != nil {
			return e.refuse(ctx, call, err)
		}
		// No header is an empty key, the core's to answer: ErrMissingKey, or
		// a run without idempotency under idempotent.WithOptionalKey.
		if key != "" {
			call.Key, call.Scope = key, req.scope
			fp, err := fingerprint(&req)
			if err != nil {
				return e.refuse(ctx, call, err)
			}
			call.Payload = fp // a []byte, hashed as given
			call.Accept = x.accept
			x.keyed = true
		}
	}
	res, err := e.Core.Do(ctx, call, x.work)
	switch {
	case res.Ran:
		// A first run, or a run without idempotency: the client gets the
		// handler's own response, whatever happened to the record.
		return e.ranResult(ctx, &req, x)
	case err != nil:
		return problem(httprules.Failure(err, e.RetryAfter))
	case x.stored == nil:
		// The core replays only what accept decoded; anything else is a
		// fault in the core, answered as one rather than with an empty response.
		e.Log().LogAttrs(ctx, slog.LevelError, "apigateway: the core replayed a response that was not decoded")
		return problem(httprules.Internal())
	}
	stored := *x.stored
	if stored.Headers == nil {
		stored.Headers = make(map[string]string, 1)
	}
	stored.Headers[HeaderReplayed] = "true"
	return stored
}

// refuse answers with a 400 problem a request the adapter refuses itself,
// before any Do, and reports the refusal to the core, which tells the outcome
// hook and the log (OutcomeRejected, with ErrInvalidKey or ErrInvalidPayload
// wrapping why).
func (e *engine) refuse(ctx context.Context, call idempotent.Call, why error) response {
	p, err := httprules.Refusal(why)
	_ = e.Core.Reject(ctx, call, err)
	return problem(p)
}

// problem renders p as the adapter's response.
func problem(p httprules.Problem) response { return p.Response() }

// exchange is one request on its way through the core: the work and accept
// the core calls, and what they found. serve decides from the core's Result
// alone whether the handler ran; ran is only for its safety net.
type exchange struct {
	e       *engine
	handler func(context.Context) (response, error) // the user's handler
	keyed   bool                                    // the call has a key: the core keeps a record of it

	ran      bool      // run was called
	original response  // what the handler returned, sent back unchanged
	err      error     // the handler's error, or its recovered panic
	stored   *response // the stored response accept decoded, on a replay
}

// work is what the core makes idempotent: it runs the handler and returns
// the response to store, encoded, or an error that makes the core release
// the record: the handler's error, its panic, or httprules.NotStoredError.
func (x *exchange) work(ctx context.Context) ([]byte, error) {
	x.run(ctx)
	switch {
	case x.err != nil:
		return nil, x.err
	case !httprules.Storable(x.original.StatusCode):
		return nil, &httprules.NotStoredError{Status: x.original.StatusCode}
	case !x.keyed:
		return nil, nil // a run without idempotency: nothing is stored
	}
	stored := x.e.Filter.Stored(&x.original)
	return httprules.Encode(&stored)
}

// accept decodes a stored response before the core replays it. A status
// this adapter never stores means the record is not ours, or is damaged:
// replaying it would answer garbage.
func (x *exchange) accept(raw []byte) (err error) {
	x.stored, err = httprules.Decode(raw)
	return err
}

// run runs the handler once, recording its response, error or panic.
func (x *exchange) run(ctx context.Context) {
	x.ran = true
	defer func() {
		if v := recover(); v != nil {
			x.err = &httprules.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	x.original, x.err = x.handler(ctx)
}

// callerScope settles the scope of a request a Lambda authorizer authorized:
// the WithAuthorizerCaller field of its context when one is set (an error
// when that field is missing), else the principalId scopeV1/scopeV2 found.
// Without either, such requests share the anonymous scope, which is logged
// once as a warning: it usually means an authorizer with simple responses.
func (e *engine) callerScope(ctx context.Context, req *request) error {
	if req.lambdaAuth == nil {
		return nil
	}
	if field := e.callerField; field != "" {
		kind, v, ok := scalarString(req.lambdaAuth[field])
		if !ok {
			return fmt.Errorf("the Lambda authorizer's context has no usable %q field (WithAuthorizerCaller): "+
				"want a non-empty string, an integer of magnitude below 2^53 or a boolean", field)
		}
		req.scope = principal(callerLambdaCtx, field, kind, v)
		return nil
	}
	if req.scope == anonymous {
		e.sharedScopeWarning.Do(func() {
			e.Log().LogAttrs(ctx, slog.LevelWarn, "apigateway: a Lambda authorizer passed no principalId, so its callers share "+
				"one idempotency scope; name the context field that identifies them with apigateway.WithAuthorizerCaller")
		})
	}
	return nil
}

// maxExactInt bounds the integers accepted as caller ids: a float64 (what a
// JSON number decodes to) tells every integer of smaller magnitude apart,
// but 2^53 and 2^53+1 decode the same.
const maxExactInt = 1 << 53

// scalarString renders an authorizer context value that names a caller,
// with its kind ("s" string, "n" integer, "b" boolean) so that "1" and 1 are
// different callers. ok is false for a missing or empty value, a number that
// is not an integer of magnitude below 2^53, and any other type.
func scalarString(v any) (kind, s string, ok bool) {
	switch v := v.(type) {
	case string:
		return "s", v, v != ""
	case float64:
		if v != math.Trunc(v) || math.Abs(v) >= maxExactInt {
			return "", "", false
		}
		return "n", strconv.FormatInt(int64(v), 10), true
	case int:
		return scalarString(int64(v))
	case int64:
		if v >= maxExactInt || v <= -maxExactInt {
			return "", "", false
		}
		return "n", strconv.FormatInt(v, 10), true
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return "", "", false
		}
		return scalarString(n)
	case bool:
		return "b", strconv.FormatBool(v), true
	}
	return "", "", false
}

// ranResult is the answer to a request that ran the handler.
func (e *engine) ranResult(ctx context.Context, req *request, x *exchange) response {
	if x.err != nil {
		attrs := []slog.Attr{slog.String("method", req.method), slog.String("error", x.err.Error())}
		var pe *httprules.PanicError
		if errors.As(x.err, &pe) {
			attrs = append(attrs, slog.String("stack", string(pe.Stack)))
		}
		e.Log().LogAttrs(ctx, slog.LevelError, "apigateway: handler failed", attrs...)
		return problem(httprules.Internal())
	}
	return x.original
}
