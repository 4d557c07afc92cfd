package nethttp

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// options are the middleware's settings, set by its Options. The core's
// (logger, optional key, expiry, ...) are the idempotent.Engine's.
type options struct {
	methods       []string      // upper case; those that need a key (WithMethods)
	retryAfter    time.Duration // WithRetryAfter
	volatile      []string      // lower case (WithVolatileHeaders)
	replayCookies bool          // WithReplayCookies
	maxBody       int64         // the request and buffered response body limit (WithMaxBody)
	// scope names the caller of a request with a key (WithScope); nil
	// leaves it to the request's context (see scopeOf).
	scope func(*http.Request) (string, error)
}

// defaultOptions are the settings before any option: POST and PATCH need a
// key, Retry-After is DefaultRetryAfter, bodies up to DefaultMaxBody.
func defaultOptions() options {
	return options{methods: []string{"POST", "PATCH"}, retryAfter: DefaultRetryAfter, maxBody: DefaultMaxBody}
}

// middleware is a Middleware's settings made ready for requests, with the
// engine under it. It is safe for concurrent use.
type middleware struct {
	options
	core     *idempotent.Engine // the engine every request goes through
	filter   *headerFilter      // of the stored headers
	disabled bool               // IDEMKIT_DISABLED was set: no key or body is refused
	needsKey map[string]bool    // by upper-case method
}

func newMiddleware(core *idempotent.Engine, o options) *middleware {
	if len(o.methods) == 0 {
		panic("nethttp: WithMethods: no methods")
	}
	m := &middleware{options: o, core: core, filter: newHeaderFilter(o.volatile, o.replayCookies), needsKey: make(map[string]bool, len(o.methods))}
	for _, method := range o.methods {
		m.needsKey[strings.ToUpper(method)] = true
	}
	// With IDEMKIT_DISABLED the core runs every call without idempotency
	// (and says so in its log), so the middleware refuses no key or body the
	// core would not look at.
	m.disabled = core.Disabled()
	return m
}

// panicError is a handler panic, turned into an error inside the core's work
// so that the record is released; it keeps the stack of the panic for the
// log, taken where the panic happened.
type panicError struct {
	value any    // what the handler panicked with
	stack []byte // the stack where it panicked
}

func (e *panicError) Error() string { return fmt.Sprintf("idempotent: handler panicked: %v", e.value) }

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through the panic.
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}
