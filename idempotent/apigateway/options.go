package apigateway

import (
	"fmt"

	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// An Option configures HandlerV1, HandlerV2, WrapV1 or WrapV2: how the
// door names callers (WithAuthorizerCaller) and, for WrapV1 and WrapV2,
// the options of the nethttp.Middleware inside them (WithHTTPOptions).
type Option func(*options)

type options struct {
	field string           // WithAuthorizerCaller; "" names callers by the authorizer's principal
	http  []nethttp.Option // WithHTTPOptions
	wrap  bool             // WithHTTPOptions was given: an option for WrapV1 and WrapV2 only
}

// WithHTTPOptions gives WrapV1 or WrapV2 the options of the
// nethttp.Middleware inside it: nethttp.WithMethods, nethttp.WithRetryAfter,
// nethttp.WithVolatileHeaders, nethttp.WithReplayCookies,
// nethttp.WithMaxBody, or nethttp.WithScope, which then names callers
// instead of the door. HandlerV1 and HandlerV2 run no middleware of their
// own (give the options to nethttp.Middleware): given WithHTTPOptions, they
// panic.
func WithHTTPOptions(opts ...nethttp.Option) Option {
	return func(o *options) { o.http, o.wrap = append(o.http, opts...), true }
}

// newOptions applies opts.
func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// handlerOptions is newOptions for HandlerV1 or HandlerV2 (name), which
// run no middleware: HTTP options panic.
func handlerOptions(name string, opts []Option) options {
	o := newOptions(opts)
	if o.wrap {
		panic(fmt.Sprintf("apigateway: %s: WithHTTPOptions is for WrapV1 and WrapV2; give nethttp's options to nethttp.Middleware", name))
	}
	return o
}
