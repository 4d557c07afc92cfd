package nethttp

import (
	"net/http"
	"strings"
	"time"
)

// DefaultRetryAfter is the Retry-After sent with 409 (in progress) and 503
// (store unavailable) answers unless WithRetryAfter says otherwise.
const DefaultRetryAfter = time.Second

// DefaultMaxBody is the largest request body read and response body buffered
// unless WithMaxBody says otherwise: 6 MiB, Lambda's limit on a synchronous
// response.
const DefaultMaxBody = 6 << 20

// An Option configures Middleware: the middleware's own settings. The
// core's (prefix, expiry, logger, outcome hooks, optional keys, ...) are the
// idempotent.Engine's, given once to idempotent.New.
type Option func(*options)

// WithMethods sets the HTTP methods that require an Idempotency-Key,
// replacing the default POST and PATCH. Requests with any other method go
// straight to the handler, untouched. Method names are matched
// case-insensitively. Giving no methods panics in Middleware.
func WithMethods(methods ...string) Option {
	return func(o *options) {
		o.methods = make([]string, len(methods))
		for i, m := range methods {
			o.methods[i] = strings.ToUpper(m)
		}
	}
}

// WithRetryAfter sets the Retry-After of 409 (in progress) and 503 (store
// unavailable) answers, default DefaultRetryAfter. It is sent in whole
// seconds, rounded up; values below one second are raised to one second.
func WithRetryAfter(d time.Duration) Option {
	return func(o *options) { o.retryAfter = max(d, time.Second) }
}

// WithVolatileHeaders names response headers that are neither stored nor
// replayed, such as per-request ids or timing headers. Hop-by-hop headers,
// Date and (see WithReplayCookies) Set-Cookie are always left out. Names are
// matched case-insensitively.
func WithVolatileHeaders(names ...string) Option {
	return func(o *options) {
		for _, n := range names {
			o.volatile = append(o.volatile, strings.ToLower(n))
		}
	}
}

// WithReplayCookies stores the response's Set-Cookie headers and replays
// them. By default cookies are neither stored nor replayed: they often carry
// session secrets, which should not sit in the store nor be handed to
// whoever presents the same key again.
func WithReplayCookies() Option { return func(o *options) { o.replayCookies = true } }

// WithMaxBody sets the largest request body the middleware reads (a larger
// one is answered 413 without running the handler) and the largest response
// body it buffers before the record is completed (a larger one passes
// through to the client and is not stored: see the package documentation),
// default DefaultMaxBody. Values below 1 are raised to 1.
func WithMaxBody(n int64) Option { return func(o *options) { o.maxBody = max(n, 1) } }

// WithScope confines keys to the caller that scope names, such as the
// authenticated principal that an authentication middleware (running before
// this one) put in the request's context: two callers that send the same key
// never see each other's responses. It is called for requests that carry a
// key; an error answers 500 without running the handler, and is logged at
// error level (to the Engine's logger). WithScope wins over the scope a
// request's context carries (ContextWithScope, ContextWithScopeError), which
// names the caller without it; with neither, all callers share one key
// space. A nil function panics.
func WithScope(scope func(*http.Request) (string, error)) Option {
	if scope == nil {
		panic("nethttp: WithScope: nil function")
	}
	return func(o *options) { o.scope = scope }
}
