package httprules

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// DefaultRetryAfter is the Retry-After sent with 409 (in progress) and 503
// (store unavailable) answers unless configured otherwise.
const DefaultRetryAfter = time.Second

// DefaultMaxBody is the largest request body read and response body
// buffered unless configured otherwise: 6 MiB, Lambda's limit on a
// synchronous response.
const DefaultMaxBody = 6 << 20

// Config holds the settings of the HTTP middleware (package nethttp), the
// one HTTP front door: nethttp's Option is a func(*Config), set through its
// With options, and package apigateway, which translates API Gateway events
// to net/http around that middleware, sets the fields of its own (Name,
// Scope) with the same Option type. The core's settings (logger, optional
// key, expiry, ...) are the idempotent.Engine's, given once to idempotent.New.
type Config struct {
	Name          string        // the front door, in log lines and panics: "nethttp", "apigateway"
	Methods       []string      // upper case; those that need a key (WithMethods)
	RetryAfter    time.Duration // WithRetryAfter
	Volatile      []string      // lower case (WithVolatileHeaders)
	ReplayCookies bool          // WithReplayCookies
	MaxBody       int64         // the request and buffered response body limit (WithMaxBody)
	// Scope names the caller of a request with a key (WithScope; apigateway's
	// authorizer rules); nil puts every caller in one key space.
	Scope func(*http.Request) (string, error)
}

// DefaultConfig is the configuration before any option: POST and PATCH need
// a key, Retry-After is DefaultRetryAfter, bodies up to DefaultMaxBody.
func DefaultConfig(name string) Config {
	return Config{Name: name, Methods: []string{"POST", "PATCH"}, RetryAfter: DefaultRetryAfter, MaxBody: DefaultMaxBody}
}

// SetMethods sets the methods that need a key, upper-cased.
func (c *Config) SetMethods(methods []string) {
	c.Methods = make([]string, len(methods))
	for i, m := range methods {
		c.Methods[i] = strings.ToUpper(m)
	}
}

// Rules is a Config made ready for requests, with the core engine under it.
// It is safe for concurrent use.
type Rules struct {
	Config
	Filter   *Filter            // of the stored headers
	Core     *idempotent.Engine // the engine every request goes through
	Disabled bool               // IDEMKIT_DISABLED was set: no key or body is refused
	methods  map[string]bool
}

// New makes the rules of cfg over core. cfg.Name names the front door in
// panics (programmer errors, found at start-up): a nil Engine, no methods.
func New(core *idempotent.Engine, cfg Config) *Rules {
	switch {
	case core == nil:
		panic(cfg.Name + ": nil Engine")
	case len(cfg.Methods) == 0:
		panic(cfg.Name + ": WithMethods: no methods")
	}
	r := &Rules{Config: cfg, Filter: NewFilter(cfg.Volatile, cfg.ReplayCookies), Core: core, methods: make(map[string]bool, len(cfg.Methods))}
	for _, m := range cfg.Methods {
		r.methods[m] = true
	}
	// With IDEMKIT_DISABLED the core runs every call without idempotency
	// (and says so in its log), so the front door refuses no key or body the
	// core would not look at.
	r.Disabled = r.Core.Disabled()
	return r
}

// NeedsKey reports whether requests of method (upper case) need an
// Idempotency-Key; others go straight to the handler.
func (r *Rules) NeedsKey(method string) bool { return r.methods[method] }

// Log is the front door's logger: the Engine's (idempotent.WithLogger, else
// slog.Default()).
func (r *Rules) Log() *slog.Logger { return r.Core.Logger() }

// PanicError is a handler panic, turned into an error inside the core's work
// so that the record is released; it keeps the stack of the panic for the
// log, taken where the panic happened.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the stack where it panicked
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("idempotent: handler panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through the panic.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// HandlerError is the error a typed handler returned (apigateway's handlers
// return one; an http.Handler cannot), raised as a panic by the http.Handler
// that calls it so that the middleware's one recovery makes it a failed run:
// the record released, the failure logged (without a stack: it is no
// panic), a 500 internal-error answered. The outcome's error is the
// handler's own.
type HandlerError struct {
	Err error // never nil
}

// Error is the handler's error's.
func (e *HandlerError) Error() string { return e.Err.Error() }

// Unwrap returns the handler's error.
func (e *HandlerError) Unwrap() error { return e.Err }
