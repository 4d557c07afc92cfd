package frontdoor

import (
	"context"
	"log/slog"
)

// Call is what a front door knows about one call.
type Call struct {
	// Key is the idempotency key, as the client sent it (at most 1,024 bytes
	// of UTF-8). An empty key is idempotent.ErrMissingKey, or runs without
	// idempotency under idempotent.WithOptionalKey.
	Key string
	// Scope, when set, confines the key to a caller or tenant.
	Scope string
	// Payload, when not nil, is what a duplicate must repeat; it is hashed by
	// the rule of idempotent.WithPayloadValidation.
	Payload any
	// Accept, when set, vets a stored response before it is replayed (by
	// decoding it, say): an error is the call's answer, wrapped with
	// idempotent.ErrCorruptRecord, and the response is never replayed.
	Accept func(response []byte) error
	// Attrs, when set, are added to every line the Engine logs about the
	// call (its outcome, a panic in the work), to tie them to the front
	// door's own lines: sqsbatch adds "message_id". They travel in the
	// work's context, so calls the work makes through an Engine log them
	// too. Outcome hooks do not see them. Never put a raw key or payload
	// in them.
	Attrs []slog.Attr
}

// Result is the answer of Engine.Do.
type Result struct {
	// Response is the encoded response: the one the work returned, or the
	// stored one replayed.
	Response []byte
	// Ran reports that this call ran the work; Response is then the work's.
	Ran bool
}

// Engine is the front doors' view of an *idempotent.Engine.
type Engine interface {
	// Do runs work at most once for call's key while its record lives, and
	// answers every call for that key with work's response: the first call
	// runs it, duplicates get the stored response (Result.Ran false) or a
	// documented error (see package idempotent's error table).
	//
	// work gets a context that ends before the lease does, and carries the
	// invocation (idempotent.FromContext, idempotent.DownstreamKey) and the
	// record's steps (idempotent.Step). Its error releases the record, so a
	// retry runs again (or, when the record holds finished steps, suspends
	// it, so the retry resumes after them), and is returned by Do unchanged
	// with Result.Ran set (but see NotStored). A panic in work gives the
	// record back the same way and is re-raised.
	Do(ctx context.Context, call Call, work func(context.Context) ([]byte, error)) (Result, error)

	// Reject reports a call a front door refused before Do, such as one
	// whose key it could not parse or whose body is not valid JSON: the
	// outcome hook and the log see idempotent.OutcomeRejected, with the
	// record id when call names a valid key. It returns err.
	Reject(ctx context.Context, call Call, err error) error

	// NotStored returns the error a work function returns when it ran (its
	// side effects happened) but its response cannot be stored: too large,
	// already streamed to the client, not encodable. Do then completes the
	// record without a response instead of releasing it, so a duplicate
	// gets idempotent.ErrResponseNotStored and never runs the work again;
	// the outcome is idempotent.OutcomeNotStored, and Do returns the error
	// (it wraps idempotent.ErrResponseEncoding and reason). The error is
	// bound to this Engine: returned through another Engine's work, it is an
	// ordinary failure there.
	NotStored(reason error) error

	// Logger returns the Engine's logger (idempotent.WithLogger, else
	// slog.Default()), for front doors that log lines of their own.
	Logger() *slog.Logger

	// Disabled reports whether IDEMKIT_DISABLED was set when the Engine was
	// made: Do then runs every call's work without idempotency, and a front
	// door need not derive keys or payloads at all.
	Disabled() bool

	// Transactional reports whether the Engine's store commits handlers'
	// writes with the completion (storage.TxStore): only then may a front
	// door have to hold a response until the commit.
	Transactional() bool
}

// of is the function package idempotent registers.
var of func(engine any) Engine

// Register sets the function Of calls. Package idempotent calls it from an
// init function; nothing else does.
func Register(fn func(engine any) Engine) { of = fn }

// Of returns the front doors' view of engine, an *idempotent.Engine; the
// view of a nil Engine panics when used, so front doors refuse a nil Engine
// first. Of panics on anything else: a programmer error of this module.
func Of(engine any) Engine { return of(engine) }
