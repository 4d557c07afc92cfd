package httprules

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// DefaultRetryAfter is the Retry-After sent with 409 (in progress) and 503
// (store unavailable) answers unless configured otherwise.
const DefaultRetryAfter = time.Second

// Config holds the settings every HTTP front door has; each sets it through
// its own With options.
type Config struct {
	Methods       []string            // upper case; those that need a key (WithMethods)
	OptionalKey   bool                // WithOptionalKey
	RetryAfter    time.Duration       // WithRetryAfter
	Volatile      []string            // lower case (WithVolatileHeaders)
	ReplayCookies bool                // WithReplayCookies
	Logger        *slog.Logger        // WithLogger; nil for slog.Default()
	Core          []idempotent.Option // WithIdempotentOptions
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

// New makes the rules of cfg over store. pkg names the front door in panics
// (programmer errors, found at start-up): no methods, a nil store, options
// only a typed front door can use.
func New(pkg string, store storage.Store, cfg Config) *Rules {
	if len(cfg.Methods) == 0 {
		panic(pkg + ": WithMethods: no methods")
	}
	r := &Rules{Config: cfg, Filter: NewFilter(cfg.Volatile, cfg.ReplayCookies), methods: make(map[string]bool, len(cfg.Methods))}
	for _, m := range cfg.Methods {
		r.methods[m] = true
	}
	// The core's options, later ones winning: the front door's defaults (it
	// has none today), then WithIdempotentOptions, then the front door's own
	// explicit options, so its WithLogger wins over an idempotent.WithLogger
	// given through WithIdempotentOptions. NewEngine panics on the options
	// only a typed front door can use (idempotent.WithKey, WithScope,
	// WithPayloadValidation, WithReplayHook): an HTTP front door derives the
	// key, the scope and the payload from the request itself.
	core := slices.Clip(cfg.Core)
	if cfg.Logger != nil {
		core = append(core, idempotent.WithLogger(cfg.Logger))
	}
	if cfg.OptionalKey {
		core = append(core, idempotent.WithOptionalKey())
	}
	r.Core = idempotent.NewEngine(store, core...)
	// With IDEMKIT_DISABLED the core runs every call without idempotency
	// (and says so in its log), so the front door refuses no key or body the
	// core would not look at.
	r.Disabled = r.Core.Disabled()
	return r
}

// NeedsKey reports whether requests of method (upper case) need an
// Idempotency-Key; others go straight to the handler.
func (r *Rules) NeedsKey(method string) bool { return r.methods[method] }

// Log is the front door's logger: WithLogger's, else slog.Default().
func (r *Rules) Log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

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
