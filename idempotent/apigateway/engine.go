package apigateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent"
)

// HeaderReplayed marks a replayed response: "Idempotent-Replayed: true".
const HeaderReplayed = "Idempotent-Replayed"

// engine is the implementation WrapV1 and WrapV2 share, over the neutral
// request and response types. It is a front door of idempotent.Engine: it
// parses the key, names the caller and fingerprints the request itself, then
// makes one core.Do call per request; the core calls back only into the
// work (the handler) and into the decoding of a stored response.
type engine struct {
	opts     options
	methods  map[string]bool
	drop     map[string]bool // lower-case names of headers never stored
	core     *idempotent.Engine
	disabled bool // idempotent.DisableEnv was set when wrapping

	sharedScopeWarning sync.Once // see callerScope
}

// notStoredError makes the core release the record of a response that must
// not be replayed (5xx and transient 4xx): the client's retry runs again.
type notStoredError struct{ status int }

func (e *notStoredError) Error() string {
	return fmt.Sprintf("apigateway: status %d is not stored", e.status)
}

// panicError is a handler panic, turned into an error inside the core so it
// releases the record; it keeps the stack of the panic for the log, taken
// where the panic happened.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("apigateway: handler panicked: %v", e.value) }

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through the panic.
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}

func newEngine(store idempotent.Store, opts []Option) *engine {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.methods) == 0 {
		panic("apigateway: WithMethods: no methods")
	}
	e := &engine{opts: o, methods: make(map[string]bool), drop: make(map[string]bool)}
	for _, m := range o.methods {
		e.methods[m] = true
	}
	for _, h := range [...]string{"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "date", strings.ToLower(HeaderReplayed)} {
		e.drop[h] = true
	}
	for _, h := range o.volatile {
		e.drop[h] = true
	}
	if !o.replayCookies {
		e.drop["set-cookie"] = true
	}

	// The core's options, later ones winning: the adapter's defaults (it has
	// none today), then WithIdempotentOptions, then the adapter's own
	// explicit options, so apigateway.WithLogger wins over an
	// idempotent.WithLogger given through WithIdempotentOptions. NewEngine
	// panics on the options only a typed front door can use (idempotent.WithKey,
	// WithScope, WithPayloadValidation, WithReplayHook): the adapter derives
	// the key, the scope and the payload from the request itself.
	core := slices.Clip(o.core)
	if o.logger != nil {
		core = append(core, idempotent.WithLogger(o.logger))
	}
	if o.optionalKey {
		core = append(core, idempotent.WithOptionalKey())
	}
	e.core = idempotent.NewEngine(store, core...)
	// With IDEMKIT_DISABLED the core runs every call without idempotency
	// (and says so in its log), so the adapter refuses no key or body the
	// core would not look at.
	e.disabled = e.core.Disabled()
	return e
}

func (e *engine) logger() *slog.Logger {
	if e.opts.logger != nil {
		return e.opts.logger
	}
	return slog.Default()
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
			e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: recovered panic",
				slog.String("error", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			out = internalError()
			if x.ran && x.err == nil {
				out = x.original
			}
		}
	}()

	if req.method == "" {
		// Not an API Gateway proxy request (or not of this payload version):
		// without a method the adapter cannot tell whether it needs a key.
		e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: event without an HTTP method; the handler did not run "+
			"(is the function wrapped for the other payload format version, or invoked with another kind of event?)")
		return e.refuse(ctx, idempotent.Call{}, errNoMethod)
	}
	if !e.methods[req.method] {
		x.run(ctx)
		return e.ranResult(ctx, &req, x)
	}
	if err := e.callerScope(ctx, &req); err != nil {
		e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: cannot name the caller; the handler did not run",
			slog.String("method", req.method), slog.String("error", err.Error()))
		return internalError()
	}

	var call idempotent.Call
	if !e.disabled {
		key, err := parseKey(req.keyValues)
		if err != nil {
			return e.refuse(ctx, call, err)
		}
		// An empty key is the core's to answer: ErrMissingKey, or a run
		// without idempotency under WithOptionalKey.
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
	res, err := e.core.Do(ctx, call, x.work)
	switch {
	case res.Ran:
		// A first run, or a run without idempotency: the client gets the
		// handler's own response, whatever happened to the record.
		return e.ranResult(ctx, &req, x)
	case err != nil:
		return e.failure(err)
	case x.stored == nil:
		// The core replays only what accept decoded; anything else is a
		// fault in the core, answered as one rather than with an empty response.
		e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: the core replayed a response that was not decoded")
		return internalError()
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
	sentinel := idempotent.ErrInvalidPayload
	var out response
	switch why := why.(type) {
	case *keyError:
		sentinel = idempotent.ErrInvalidKey
		out = problemResponse(http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", upperFirst(why.reason)+".", 0)
	case *bodyError:
		out = problemResponse(http.StatusBadRequest, ProblemInvalidJSON, "Invalid JSON request body", upperFirst(why.reason)+".", 0)
	case *requestError:
		out = problemResponse(http.StatusBadRequest, ProblemMalformedRequest, "Malformed request", upperFirst(why.reason)+".", 0)
	default:
		out = internalError()
	}
	_ = e.core.Reject(ctx, call, fmt.Errorf("%w: %w", sentinel, why))
	return out
}

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
// the record: the handler's error, its panic, or notStoredError.
func (x *exchange) work(ctx context.Context) ([]byte, error) {
	x.run(ctx)
	switch {
	case x.err != nil:
		return nil, x.err
	case !storable(x.original.StatusCode):
		return nil, &notStoredError{x.original.StatusCode}
	case !x.keyed:
		return nil, nil // a run without idempotency: nothing is stored
	}
	raw, err := json.Marshal(x.e.storedForm(&x.original))
	if err != nil {
		// Cannot happen: the stored form is strings (valid UTF-8, see
		// asSent), an int and a bool.
		return nil, fmt.Errorf("apigateway: encode the response: %w", err)
	}
	return raw, nil
}

// accept decodes a stored response before the core replays it. A status
// this adapter never stores means the record is not ours, or is damaged:
// replaying it would answer garbage.
func (x *exchange) accept(raw []byte) error {
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if !storable(r.StatusCode) {
		return fmt.Errorf("stored status code %d", r.StatusCode)
	}
	x.stored = &r
	return nil
}

// run runs the handler once, recording its response, error or panic.
func (x *exchange) run(ctx context.Context) {
	x.ran = true
	defer func() {
		if v := recover(); v != nil {
			x.err = &panicError{value: v, stack: debug.Stack()}
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
	if field := e.opts.callerField; field != "" {
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
			e.logger().LogAttrs(ctx, slog.LevelWarn, "apigateway: a Lambda authorizer passed no principalId, so its callers share "+
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
		var pe *panicError
		if errors.As(x.err, &pe) {
			attrs = append(attrs, slog.String("stack", string(pe.stack)))
		}
		e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: handler failed", attrs...)
		return internalError()
	}
	return x.original
}

// storable reports whether a response with this status is stored and
// replayed: 2xx to 4xx, except the transient 408, 409, 425 and 429, whose
// retry may well succeed.
func storable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status <= 499
}

// storedForm is the part of a response that is stored and replayed: all of
// it but hop-by-hop headers (including those the Connection header names),
// Date, volatile headers and, unless WithReplayCookies, cookies.
func (e *engine) storedForm(r *response) response {
	listed := map[string]bool{} // API Gateway merges both header maps
	for _, v := range append(headerValues(r.Headers, nil, "Connection"), headerValues(nil, r.MultiValueHeaders, "Connection")...) {
		for name := range strings.SplitSeq(v, ",") {
			listed[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	keep := func(name string) bool {
		n := strings.ToLower(name)
		return !e.drop[n] && !listed[n] && !strings.HasPrefix(n, "proxy-")
	}
	s := response{StatusCode: r.StatusCode, Body: asSent(r.Body), IsBase64Encoded: r.IsBase64Encoded}
	for k, v := range r.Headers {
		if keep(k) {
			if s.Headers == nil {
				s.Headers = make(map[string]string, len(r.Headers))
			}
			s.Headers[asSent(k)] = asSent(v)
		}
	}
	for k, v := range r.MultiValueHeaders {
		if keep(k) {
			if s.MultiValueHeaders == nil {
				s.MultiValueHeaders = make(map[string][]string, len(r.MultiValueHeaders))
			}
			vs := make([]string, len(v))
			for i := range v {
				vs[i] = asSent(v[i])
			}
			s.MultiValueHeaders[asSent(k)] = vs
		}
	}
	if e.opts.replayCookies && r.Cookies != nil {
		s.Cookies = make([]string, len(r.Cookies))
		for i := range r.Cookies {
			s.Cookies[i] = asSent(r.Cookies[i])
		}
	}
	return s
}

// asSent is s as the client received it: the Lambda runtime sends the
// response as JSON, which turns each byte that is not valid UTF-8 into
// U+FFFD. The stored form holds the same, so a replay equals what the first
// client got, and its JSON decodes to exactly what was encoded.
func asSent(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // one U+FFFD per invalid byte, as encoding/json
}

// failure answers a request the core refused. Keys and bodies the adapter
// refuses itself never get here (see refuse); an invalid key from the core
// (one this adapter would not have parsed) gets a generic detail.
func (e *engine) failure(err error) response {
	switch {
	case errors.Is(err, idempotent.ErrMissingKey):
		return problemResponse(http.StatusBadRequest, ProblemMissingKey, "Idempotency-Key header missing",
			"This operation requires an Idempotency-Key header; send a unique key, such as a UUID, and reuse it only to retry the same request.", 0)
	case errors.Is(err, idempotent.ErrInvalidKey):
		return problemResponse(http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", "The Idempotency-Key header is not valid.", 0)
	case errors.Is(err, idempotent.ErrPayloadMismatch):
		return problemResponse(http.StatusUnprocessableEntity, ProblemPayloadMismatch, "Idempotency-Key already used",
			"This Idempotency-Key was already used for a different request (method, path, query or body). Use a new key for a new request.", 0)
	case errors.Is(err, idempotent.ErrInProgress):
		return problemResponse(http.StatusConflict, ProblemInProgress, "A request with this Idempotency-Key is in progress",
			"A request with the same Idempotency-Key is still being processed. Retry after the Retry-After delay to get its response.", e.opts.retryAfter)
	case errors.Is(err, idempotent.ErrResponseNotStored):
		return problemResponse(http.StatusConflict, ProblemResponseNotStored, "Response not available",
			"A request with this Idempotency-Key was already processed, but its response was not kept and cannot be returned again. Do not retry it with this key.", 0)
	case errors.Is(err, idempotent.ErrCorruptRecord):
		return problemResponse(http.StatusInternalServerError, ProblemCorruptRecord, "Idempotency record unreadable",
			"The stored record for this Idempotency-Key cannot be read.", 0)
	case errors.Is(err, idempotent.ErrStore):
		return problemResponse(http.StatusServiceUnavailable, ProblemStoreUnavailable, "Service temporarily unavailable",
			"The request was not processed. Retry after the Retry-After delay with the same Idempotency-Key.", e.opts.retryAfter)
	}
	return internalError()
}

func internalError() response {
	return problemResponse(http.StatusInternalServerError, ProblemInternal, "Internal server error",
		"The request could not be processed. It may be retried with the same Idempotency-Key.", 0)
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
