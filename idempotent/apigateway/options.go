package apigateway

import (
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

// DefaultRetryAfter is the Retry-After sent with 409 (in progress) and 503
// (store unavailable) answers unless WithRetryAfter says otherwise.
const DefaultRetryAfter = httprules.DefaultRetryAfter

// An Option configures WrapV1 and WrapV2: the adapter's own settings. The
// core's (prefix, expiry, logger, outcome hooks, optional keys, ...) are the
// idempotent.Engine's, given once to idempotent.New.
type Option func(*options)

// options are the settings every HTTP front door shares (httprules.Config)
// and the adapter's own.
type options struct {
	httprules.Config
	callerField string
}

func defaultOptions() options {
	return options{Config: httprules.DefaultConfig()}
}

// WithMethods sets the HTTP methods that require an Idempotency-Key,
// replacing the default POST and PATCH. Requests with any other method go
// straight to the handler. Method names are matched case-insensitively.
// Giving no methods panics when wrapping.
func WithMethods(methods ...string) Option {
	return func(o *options) { o.SetMethods(methods) }
}

// WithRetryAfter sets the Retry-After of 409 (in progress) and 503 (store
// unavailable) answers, default DefaultRetryAfter. It is sent in whole
// seconds, rounded up; values below one second are raised to one second.
func WithRetryAfter(d time.Duration) Option {
	return func(o *options) { o.RetryAfter = max(d, time.Second) }
}

// WithVolatileHeaders names response headers that are neither stored nor
// replayed, such as per-request ids or timing headers. Hop-by-hop headers,
// Date and (see WithReplayCookies) Set-Cookie are always left out. Names are
// matched case-insensitively.
func WithVolatileHeaders(names ...string) Option {
	return func(o *options) {
		for _, n := range names {
			o.Volatile = append(o.Volatile, strings.ToLower(n))
		}
	}
}

// WithReplayCookies stores the response's cookies (Set-Cookie headers, and the
// Cookies of a payload v2 response) and replays them. By default cookies are
// neither stored nor replayed: they often carry session secrets, which should
// not sit in the store nor be handed to whoever presents the same key again.
func WithReplayCookies() Option { return func(o *options) { o.ReplayCookies = true } }

// WithAuthorizerCaller names the field of a Lambda authorizer's context that
// identifies the caller (a user or tenant id, say), for authorizers whose
// principalId is missing or shared: an HTTP API authorizer with simple
// responses passes only its context. Keys are then scoped to that field's
// value (a non-empty string, an integer of magnitude below 2^53, or a
// boolean; "1" and 1 are different callers) instead of the principalId. A
// request authorized by a Lambda authorizer whose context lacks the field
// (or holds any other value) is answered 500 without running the handler and logged at error
// level: sharing one scope across callers is never the fallback. Requests
// authorized otherwise are scoped as usual. An empty field panics when
// wrapping.
func WithAuthorizerCaller(field string) Option {
	return func(o *options) {
		if field == "" {
			panic("apigateway: WithAuthorizerCaller: empty field name")
		}
		o.callerField = field
	}
}
