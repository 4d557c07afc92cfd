package httprules

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// DefaultRetryAfter is the Retry-After sent with 409 (in progress) and 503
// (store unavailable) answers unless configured otherwise.
const DefaultRetryAfter = time.Second

// Config holds the settings every HTTP front door has; each sets it through
// its own With options. The core's settings (logger, optional key, expiry,
// ...) are the idempotent.Engine's, given once to idempotent.New.
type Config struct {
	Methods       []string      // upper case; those that need a key (WithMethods)
	RetryAfter    time.Duration // WithRetryAfter
	Volatile      []string      // lower case (WithVolatileHeaders)
	ReplayCookies bool          // WithReplayCookies
}

// DefaultConfig is the configuration before any option: POST and PATCH need
// a key, Retry-After is DefaultRetryAfter.
func DefaultConfig() Config {
	return Config{Methods: []string{"POST", "PATCH"}, RetryAfter: DefaultRetryAfter}
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
	Disabled bool               // idempotent.DisableEnv was set: no key or body is refused
	methods  map[string]bool
}

// New makes the rules of cfg over core. pkg names the front door in panics
// (programmer errors, found at start-up): a nil Engine, no methods.
func New(pkg string, core *idempotent.Engine, cfg Config) *Rules {
	switch {
	case core == nil:
		panic(pkg + ": nil Engine")
	case len(cfg.Methods) == 0:
		panic(pkg + ": WithMethods: no methods")
	}
	r := &Rules{Config: cfg, Filter: NewFilter(cfg.Volatile, cfg.ReplayCookies), Core: core, methods: make(map[string]bool, len(cfg.Methods))}
	for _, m := range cfg.Methods {
		r.methods[m] = true
	}
	// With IDEMKIT_DISABLED the core runs every call without idempotency
	// (and says so in its log), so the front door refuses no key or body the
	// core would not look at.
	r.Disabled = core.Disabled()
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
