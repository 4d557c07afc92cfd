package idempotent

import (
	"context"
	"log/slog"
)

// Call is what a front door knows about one call: the input of [Engine.Do]
// and [Engine.Reject].
type Call struct {
	// Key is the idempotency key, as the client sent it (at most 1,024 bytes
	// of text by package storage's rule). An empty key is [ErrMissingKey],
	// or runs without idempotency under [WithOptionalKey].
	Key string
	// Scope, when set, confines the key to a caller or tenant: the same key
	// in two scopes names two records.
	Scope string
	// Payload, when not nil, is what a duplicate must repeat, hashed by the
	// rule of [WithPayloadValidation]: a duplicate with another payload gets
	// [ErrPayloadMismatch].
	Payload any
	// Accept, when set, vets a stored response before it is replayed (by
	// decoding it, say): its error is the call's answer, wrapped with
	// [ErrCorruptRecord], and the response is never replayed.
	Accept func(response []byte) error
	// Attrs, when set, are added to every line the Engine logs about the
	// call (its outcome, a panic in the work), to tie them to the front
	// door's own lines: the batch adapters add the message's id. They travel
	// in the work's context, so calls the work makes through an Engine log
	// them too. Outcome hooks do not see them. Never put a raw key or
	// payload in them.
	Attrs []slog.Attr
}

// Result is the answer of [Engine.Do].
type Result struct {
	// Response is the encoded response: the one the work returned, or the
	// stored one replayed.
	Response []byte
	// Ran reports that this call ran the work; Response is then the work's.
	Ran bool
	// Replay, when Ran is false, names the record the response was replayed
	// from (for a replay marker such as nethttp's Idempotent-Replayed header);
	// it is zero when Ran is true.
	Replay Replay
}

// Do is the Engine's own call, the one every front door converges on: Wrap,
// the nethttp middleware, the apigateway adapter and the batch adapters are
// its clients, and a front door of your own (an SNS or EventBridge handler, a
// gRPC interceptor) can be one too. It runs work at most once for call's key
// while its record lives, and answers every call for that key with work's
// response: the first call runs it, a duplicate gets the stored response
// (Result.Ran false) or one of the documented errors (the table in this
// package's doc).
//
// work gets a context that ends before the lease does and carries the
// invocation ([FromContext], [DownstreamKey]), the record's steps ([Step])
// and, on a [storage.TxStore], the handler's transaction. An error from work
// releases the record, so a retry runs again (or, when the record holds
// finished steps, suspends it, so the retry resumes after them), and is
// returned by Do unchanged with Result.Ran set; an error made by
// [Engine.NotStored] completes the record instead. A panic in work gives the
// record back the same way and is re-raised.
//
// Do is what a front door calls once it has parsed its event: a call it
// refuses before Do (an unparsable key, a body that is not JSON) goes to
// [Engine.Reject] instead, so the outcome hook still sees it.
func (e *Engine) Do(ctx context.Context, call Call, work func(context.Context) ([]byte, error)) (Result, error) {
	res, err := e.do(ctx, &call, nil, funcs{work: work, acceptFn: call.Accept})
	return Result{Response: res.response, Ran: res.ran, Replay: res.replay}, err
}

// Reject reports a call a front door refused before [Engine.Do], such as one
// whose key it could not parse or whose body is not valid JSON: the outcome
// hook and the log see [OutcomeRejected], with the record id when call names
// a valid key. It returns err, for the front door to answer with.
func (e *Engine) Reject(ctx context.Context, call Call, err error) error {
	return e.reject(ctx, &call, err)
}

// NotStored returns the error a work function returns when it ran (its side
// effects happened) but its response cannot be stored: too large, already
// streamed to the client, not encodable. [Engine.Do] then completes the
// record without a response instead of releasing it, so a duplicate gets
// [ErrResponseNotStored] and never runs the work again; the outcome is
// [OutcomeNotStored], and Do returns the error (it wraps
// [ErrResponseEncoding] and reason). The error is bound to this Engine:
// returned through another Engine's work, it is an ordinary failure there.
func (e *Engine) NotStored(reason error) error { return e.notStored(reason) }

// Logger returns the Engine's logger ([WithLogger], else slog.Default()), for
// front doors that log lines of their own.
func (e *Engine) Logger() *slog.Logger { return e.logger() }

// Disabled reports whether IDEMKIT_DISABLED was set when the Engine was
// made: [Engine.Do] then runs every call's work without idempotency, and a
// front door need not derive keys or payloads at all.
func (e *Engine) Disabled() bool { return e.cfg.disabled }

// Transactional reports whether the Engine's store commits handlers' writes
// with the completion ([storage.TxStore]): only then may a front door have
// to hold a response back until the commit.
func (e *Engine) Transactional() bool { return e.txs != nil }
