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
// request and response types.
type engine struct {
	opts    options
	methods map[string]bool
	drop    map[string]bool // lower-case names of headers never stored
	core    func(context.Context, *call) (response, error)

	sharedScopeWarning sync.Once // see callerScope
}

// call is one invocation, the input the core sees. The core calls inner only
// when this invocation must run the handler, so ran tells a first run (or a
// run without idempotency) from a replay.
type call struct {
	req request
	run func(context.Context) (response, error) // the user's handler

	ran      bool     // inner was called
	original response // what the handler returned, sent back unchanged
	err      error    // the handler's error, or its recovered panic
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

	core := slices.Clip(o.core)
	if o.logger != nil {
		core = append(core, idempotent.WithLogger(o.logger))
	}
	if o.optionalKey {
		core = append(core, idempotent.WithOptionalKey())
	}
	core = append(core,
		idempotent.WithKey(func(c *call) (string, error) { return parseKey(c.req.keyValues) }),
		idempotent.WithScope(func(_ context.Context, c *call) (string, error) { return c.req.scope, nil }),
		idempotent.WithPayloadValidation(func(c *call) (any, error) {
			fp, err := fingerprint(&c.req)
			return fp, err // a []byte, hashed as given
		}),
	)
	e.core = idempotent.Wrap(store, e.inner, core...)
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
func (e *engine) serve(ctx context.Context, req request, run func(context.Context) (response, error)) (out response) {
	c := &call{req: req, run: run}
	defer func() {
		// A safety net: handler panics are recovered in handle, so this only
		// catches a fault in the adapter or the store. A handler that
		// succeeded still has its response delivered.
		if v := recover(); v != nil {
			e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: recovered panic",
				slog.String("error", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			out = internalError()
			if c.ran && c.err == nil {
				out = c.original
			}
		}
	}()

	if !e.methods[req.method] {
		e.handle(ctx, c)
		return e.ranResult(ctx, c)
	}
	if err := e.callerScope(ctx, &c.req); err != nil {
		e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: cannot name the caller; the handler did not run",
			slog.String("method", req.method), slog.String("error", err.Error()))
		return internalError()
	}
	stored, err := e.core(ctx, c)
	if c.ran {
		// A first run, or a run without idempotency: the client gets the
		// handler's own response, whatever happened to the record.
		return e.ranResult(ctx, c)
	}
	if err == nil && !storable(stored.StatusCode) {
		// This adapter never stores such a status: the record is not ours
		// (or is damaged), and replaying it would answer garbage.
		err = fmt.Errorf("%w: stored status code %d", idempotent.ErrCorruptRecord, stored.StatusCode)
	}
	if err != nil {
		return e.failure(err)
	}
	if stored.Headers == nil {
		stored.Headers = make(map[string]string, 1)
	}
	stored.Headers[HeaderReplayed] = "true"
	return stored
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

// inner is the function the core makes idempotent. It runs the handler and
// returns the response to store, or an error that makes the core release the
// record: the handler's error, its panic, or notStoredError.
func (e *engine) inner(ctx context.Context, c *call) (response, error) {
	e.handle(ctx, c)
	if c.err != nil {
		return response{}, c.err
	}
	if !storable(c.original.StatusCode) {
		return response{}, &notStoredError{c.original.StatusCode}
	}
	return e.storedForm(&c.original), nil
}

// handle runs the handler once, recording its response, error or panic.
func (e *engine) handle(ctx context.Context, c *call) {
	c.ran = true
	defer func() {
		if v := recover(); v != nil {
			c.err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	c.original, c.err = c.run(ctx)
}

// ranResult is the answer to an invocation that ran the handler.
func (e *engine) ranResult(ctx context.Context, c *call) response {
	if c.err != nil {
		attrs := []slog.Attr{slog.String("method", c.req.method), slog.String("error", c.err.Error())}
		var pe *panicError
		if errors.As(c.err, &pe) {
			attrs = append(attrs, slog.String("stack", string(pe.stack)))
		}
		e.logger().LogAttrs(ctx, slog.LevelError, "apigateway: handler failed", attrs...)
		return internalError()
	}
	return c.original
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
// client got (and the core's codec, which refuses strings it cannot give
// back, stores it).
func asSent(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // one U+FFFD per invalid byte, as encoding/json
}

// failure answers an invocation the core refused.
func (e *engine) failure(err error) response {
	var ke *keyError
	var be *bodyError
	switch {
	case errors.Is(err, idempotent.ErrMissingKey):
		return problemResponse(http.StatusBadRequest, ProblemMissingKey, "Idempotency-Key header missing",
			"This operation requires an Idempotency-Key header; send a unique key, such as a UUID, and reuse it only to retry the same request.", 0)
	case errors.Is(err, idempotent.ErrInvalidKey):
		detail := "The Idempotency-Key header is not valid."
		if errors.As(err, &ke) {
			detail = upperFirst(ke.reason) + "."
		}
		return problemResponse(http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", detail, 0)
	case errors.Is(err, idempotent.ErrInvalidPayload) && errors.As(err, &be):
		return problemResponse(http.StatusBadRequest, ProblemInvalidJSON, "Invalid JSON request body", upperFirst(be.reason)+".", 0)
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
