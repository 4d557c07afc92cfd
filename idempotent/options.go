package idempotent

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// Defaults for the options below.
const (
	// defaultExpiry is how long a completed record is replayed.
	defaultExpiry = time.Hour
	// defaultMaxLease bounds the in-progress lease; it is Lambda's maximum
	// function timeout, so by default the lease is the invocation's deadline.
	defaultMaxLease = 15 * time.Minute
	// defaultClockSkew is added to the stored lease end to tolerate clocks that
	// disagree between invocations.
	defaultClockSkew = 2 * time.Second
	// defaultPrefixName is the key prefix outside Lambda when no prefix is given.
	defaultPrefixName = "idemkit"
)

// disableEnv names the environment variable that, when "true" or "1" as New
// runs, makes every front door of the Engine run its handler directly,
// without touching the store (see the package doc). For local runs and
// tests only, never for production.
const disableEnv = "IDEMKIT_DISABLED"

// maxPrefixBytes is the longest prefix WithPrefix accepts: the record ID (the
// prefix, '#' and 64 hex digits) then fits every store's key limit, including
// DynamoDB's 1,024-byte sort key in the composite layout.
const maxPrefixBytes = storage.MaxIDBytes - 1 - 64

const (
	// maxReserve is the most time kept back from the handler to complete
	// or release the record before the lease ends (a quarter of a shorter
	// budget).
	maxReserve = time.Second
	// compressAbove is the response size above which data is compressed.
	compressAbove = 4 << 10
)

// maxDuration bounds every duration option (about 100 years), so no sum of
// them can overflow: a lease end or an expiry never lands before now.
const maxDuration = 100 * 365 * 24 * time.Hour

// An Option configures an Engine (New): the core settings every front door
// shares. Settings that need a handler's input type are WrapOptions.
//
// Duration options saturate instead of failing: each raises values below its
// documented floor, and lowers values above 100 years to 100 years, so that
// even math.MaxInt64 cannot wrap a lease end or an expiry into the past.
type Option func(*config)

// codec serializes responses for storage: encoding/json unless WithCodec.
type codec struct {
	marshal   func(v any) ([]byte, error)
	unmarshal func(data []byte, v any) error
	custom    bool // set by WithCodec: trusted to round-trip, not checked
}

type config struct {
	prefix        string
	prefixFromEnv bool // prefix is AWS_LAMBDA_FUNCTION_NAME's (no WithPrefix)
	optionalKey   bool
	expiry        time.Duration
	maxLease      time.Duration
	clockSkew     time.Duration
	takeoverDelay time.Duration
	waitMax       time.Duration
	cacheSize     int
	compressAbove int
	codec         codec
	logger        *slog.Logger
	hooks         []func(context.Context, Event)
	callHooks     []CallHook // WithCallHook (trace.go)
	now           func() time.Time
	clockSet      bool // WithClock was given: now is not the real clock
	sleep         func(context.Context, time.Duration) error
	disabled      bool
	onFollow      func() // tests: a call starts to follow a flight (coalesce.go)
}

func defaultConfig() config {
	prefix, fromEnv := defaultPrefix()
	return config{
		prefix:        prefix,
		prefixFromEnv: fromEnv,
		expiry:        defaultExpiry,
		maxLease:      defaultMaxLease,
		clockSkew:     defaultClockSkew,
		compressAbove: compressAbove,
		codec:         codec{marshal: json.Marshal, unmarshal: json.Unmarshal},
		now:           time.Now,
		sleep:         sleepCtx,
		disabled:      os.Getenv(disableEnv) == "true" || os.Getenv(disableEnv) == "1",
	}
}

// defaultPrefix is the function name without version or alias: Lambda sets
// AWS_LAMBDA_FUNCTION_NAME to the bare name. fromEnv reports that it is.
func defaultPrefix() (prefix string, fromEnv bool) {
	if name := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); name != "" {
		return name, true
	}
	return defaultPrefixName, false
}

// WithOptionalKey runs the work without idempotency, instead of returning
// ErrMissingKey, when a call has no key: the key function returned an empty
// key (Wrap, sqsbatch), or an HTTP request carries no Idempotency-Key header
// (nethttp, apigateway; a malformed header is still refused).
func WithOptionalKey() Option { return func(c *config) { c.optionalKey = true } }

// WithPrefix sets the namespace of the keys, replacing the default (the Lambda
// function name, or "idemkit" outside Lambda). Give every wrapped function
// its own prefix, and keep it stable across renames and refactoring. New
// panics on a prefix that is empty, longer than 512 bytes, not valid UTF-8
// or holding a NUL byte: not every store could hold its records (see
// package storage), so every call would fail.
//
// The default is checked the same way, once, by New: a name in
// AWS_LAMBDA_FUNCTION_NAME that is not such a prefix (a real Lambda
// function's name always is) makes New panic, naming the variable, unless
// WithPrefix replaces it. It never falls back to "idemkit", which would
// give functions one shared key space.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix, c.prefixFromEnv = prefix, false }
}

// WithExpiry sets how long a completed record is replayed (default one hour).
// Values below one second are raised to one second.
func WithExpiry(d time.Duration) Option {
	return func(c *config) { c.expiry = clampDuration(d, time.Second) }
}

// WithMaxLease caps the in-progress lease (default 15 minutes, Lambda's
// longest function timeout). The lease
// is the invocation's deadline, or now plus this maximum when that comes first
// or there is no deadline; the handler's context ends before the lease does.
// Values below one second are raised to one second.
func WithMaxLease(d time.Duration) Option {
	return func(c *config) { c.maxLease = clampDuration(d, time.Second) }
}

// WithTakeoverDelay holds the record of an owner that crashed or timed out
// for d after its lease before another invocation may take it over (default
// 0: at once), for work a person should look at before it runs again, such
// as a payment whose outcome is unknown. A d that reaches past the record's
// expiry means never automatically: the key answers ErrInProgress until the
// record expires or an operator clears it (idemkit forget). The handler's
// own deadline does not change, and an owner whose handler returned an error
// gives the record back at once, as without this option. Negative values are
// treated as zero.
func WithTakeoverDelay(d time.Duration) Option {
	return func(c *config) { c.takeoverDelay = clampDuration(d, 0) }
}

// WithClockSkew sets the margin added to the stored lease end so that another
// invocation whose clock runs ahead by up to d never takes over a live owner
// (default 2 s). Negative values are treated as zero.
func WithClockSkew(d time.Duration) Option {
	return func(c *config) { c.clockSkew = clampDuration(d, 0) }
}

// WithWaitInProgress makes a duplicate that finds the key in progress wait up
// to d for the first invocation to finish, then replay its response or, if it
// failed, run itself. It polls with backoff (50 ms, doubling up to 1 s) and
// once more when d has elapsed, then answers ErrInProgress; the context
// ending stops the wait sooner. Each poll is one store call. Without it,
// ErrInProgress is returned at once.
func WithWaitInProgress(d time.Duration) Option {
	return func(c *config) { c.waitMax = clampDuration(d, 0) }
}

// WithLocalCache keeps up to size completed records in process memory, so a
// duplicate served by the same process costs no store call. In-progress records
// are never cached. Zero or less turns the cache off (the default).
func WithLocalCache(size int) Option { return func(c *config) { c.cacheSize = size } }

// WithCodec replaces the response serialization (default json.Marshal and
// json.Unmarshal). The pair must round-trip: unmarshal of marshal's output
// yields a value equal to the original.
//
// A replay must equal the first response. A custom codec is trusted to
// round-trip: nothing below is checked for it. With encoding/json
// (encoding/json), the parts of the response are those encoding/json reaches:
// exported struct fields and embedded structs not tagged `json:"-"` (fields
// that its name rules hide included), pointer, slice and array elements, map
// keys and values. A part whose type implements json.Unmarshaler or
// encoding.TextUnmarshaler (either receiver) decodes itself, so what it holds
// is its author's business and is not looked at; one that only marshals
// itself is, as encoding/json decodes it field by field.
//
// Wrap panics, naming the type, the path and the fix, when the response
// type is an interface (any included), or when a part of it is a non-empty
// interface (JSON cannot decode into it); a chan, func, complex or
// unsafe.Pointer (JSON cannot encode it); a map key that is not a string, an
// integer, or a type implementing encoding.TextMarshaler and
// encoding.TextUnmarshaler; or an embedded pointer to an unexported struct
// type with fields (JSON cannot allocate it when decoding).
//
// A first call whose response would not come back equal gets
// ErrResponseEncoding, naming where (such as response.Items[3].Name); the
// handler ran, so the record is completed without the response and a
// duplicate gets ErrResponseNotStored. That is: an empty interface (any) in
// the response that holds anything but nil, bool, float64, string, or []any
// and map[string]any of those (an int comes back as float64, a struct as
// map[string]any); or a string or map key that is not valid UTF-8 (JSON
// replaces the invalid bytes with U+FFFD).
//
// Equal means equal as JSON keeps it: integers of any size in integer-typed
// parts come back exact, but an empty slice or map under omitempty comes
// back nil, json.RawMessage comes back compacted, and a time.Time comes back
// without its monotonic clock reading and, outside UTC, with a fixed-offset
// location (equal by Time.Equal).
func WithCodec(marshal func(v any) ([]byte, error), unmarshal func(data []byte, v any) error) Option {
	if marshal == nil || unmarshal == nil {
		panic("idempotent: WithCodec: nil function")
	}
	// encoding/json's own pair is the default, checked as the default is.
	custom := reflect.ValueOf(marshal).Pointer() != reflect.ValueOf(json.Marshal).Pointer() ||
		reflect.ValueOf(unmarshal).Pointer() != reflect.ValueOf(json.Unmarshal).Pointer()
	return func(c *config) { c.codec = codec{marshal: marshal, unmarshal: unmarshal, custom: custom} }
}

// WithLogger sets the logger (default slog.Default()). Logs carry the hashed
// record ID, never the raw key or payload.
func WithLogger(logger *slog.Logger) Option { return func(c *config) { c.logger = logger } }

// WithOutcomeHook adds hook, called once per call with its outcome, for
// metrics and tracing; see Event. Hooks compose: each WithOutcomeHook adds
// one, and they run in the order given. A hook runs synchronously and must
// not block.
func WithOutcomeHook(hook func(context.Context, Event)) Option {
	return func(c *config) {
		if hook != nil {
			c.hooks = append(c.hooks, hook)
		}
	}
}

// WithClock replaces time.Now, for tests of leases and expiry that never sleep.
// The lease budget is still measured from ctx.Deadline() on the real clock,
// as the Lambda deadline is; only "now" (claim time, lease end, expiry) moves.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now, c.clockSet = now, true }
}

// Replay describes a stored response being replayed (ReplayMarker). Where
// it came from (the local cache, another call's flight) is in the Event.
type Replay struct {
	// RecordID is the hashed storage key.
	RecordID string
	// ExpiresAt is when the record stops being replayed.
	ExpiresAt time.Time
}

// clampDuration raises d to floor and lowers it to maxDuration.
func clampDuration(d, floor time.Duration) time.Duration {
	return min(max(d, floor), maxDuration)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
