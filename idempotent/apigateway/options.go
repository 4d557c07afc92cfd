package apigateway

import (
	"time"

	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// DefaultRetryAfter is the Retry-After sent with 409 (in progress) and 503
// (store unavailable) answers unless WithRetryAfter says otherwise.
const DefaultRetryAfter = nethttp.DefaultRetryAfter

// An Option configures WrapV1 and WrapV2: the adapter's own settings. The
// core's (prefix, expiry, logger, outcome hooks, optional keys, ...) are the
// idempotent.Engine's, given once to idempotent.New.
//
// The HTTP options (WithMethods, WithRetryAfter, WithVolatileHeaders,
// WithReplayCookies) are package nethttp's, whose middleware every request
// goes through: the same rules, one implementation. WithAuthorizerCaller is
// this package's own.
type Option func(*options)

type options struct {
	http        []nethttp.Option // for the middleware
	callerField string           // WithAuthorizerCaller
}

// httpOption is a nethttp option, for the middleware.
func httpOption(o nethttp.Option) Option {
	return func(a *options) { a.http = append(a.http, o) }
}

// WithMethods is nethttp.WithMethods: it sets the HTTP methods that require
// an Idempotency-Key, replacing the default POST and PATCH. Requests with
// any other method go straight to the handler. Method names are matched
// case-insensitively. Giving no methods panics when wrapping.
func WithMethods(methods ...string) Option { return httpOption(nethttp.WithMethods(methods...)) }

// WithRetryAfter is nethttp.WithRetryAfter: it sets the Retry-After of 409
// (in progress) and 503 (store unavailable) answers, default
// DefaultRetryAfter. It is sent in whole seconds, rounded up; values below
// one second are raised to one second.
func WithRetryAfter(d time.Duration) Option { return httpOption(nethttp.WithRetryAfter(d)) }

// WithVolatileHeaders is nethttp.WithVolatileHeaders: it names response
// headers that are neither stored nor replayed, such as per-request ids or
// timing headers. Hop-by-hop headers, Date and (see WithReplayCookies)
// cookies are always left out. Names are matched case-insensitively.
func WithVolatileHeaders(names ...string) Option {
	return httpOption(nethttp.WithVolatileHeaders(names...))
}

// WithReplayCookies is nethttp.WithReplayCookies: it stores the response's
// cookies (Set-Cookie headers, and the Cookies of a payload 2.0 response)
// and replays them. By default cookies are neither stored nor replayed: they
// often carry session secrets, which should not sit in the store nor be
// handed to whoever presents the same key again.
func WithReplayCookies() Option { return httpOption(nethttp.WithReplayCookies()) }

// WithAuthorizerCaller names the field of a Lambda authorizer's context that
// identifies the caller (a user or tenant id, say), for authorizers whose
// principalId is missing or shared: an HTTP API authorizer with simple
// responses passes only its context. Keys are then scoped to that field's
// value (a non-empty string, an integer of magnitude below 2^53, or a
// boolean; "1" and 1 are different callers) instead of the principalId. A
// request with an Idempotency-Key authorized by a Lambda authorizer whose
// context lacks the field (or holds any other value) is answered 500 without
// running the handler and logged at error level: sharing one scope across
// callers is never the fallback. Requests authorized otherwise are scoped as
// usual. An empty field panics when wrapping.
func WithAuthorizerCaller(field string) Option {
	return func(o *options) {
		if field == "" {
			panic("apigateway: WithAuthorizerCaller: empty field name")
		}
		o.callerField = field
	}
}
