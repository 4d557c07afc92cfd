package idempotent

import (
	"context"
	"time"
)

// Outcome says what a wrapped invocation did. Each invocation reports exactly one.
type Outcome int

// The outcomes, reported to the hook set with WithOutcomeHook and logged.
const (
	// OutcomeExecuted: the handler ran and its response was stored.
	OutcomeExecuted Outcome = iota + 1
	// OutcomeReplayed: a stored response was returned; the handler did not run.
	OutcomeReplayed
	// OutcomeInProgress: another invocation holds the key (ErrInProgress).
	OutcomeInProgress
	// OutcomePayloadMismatch: the key was used with another payload (ErrPayloadMismatch).
	OutcomePayloadMismatch
	// OutcomeHandlerError: the handler failed or panicked; the record was released.
	OutcomeHandlerError
	// OutcomeNotStored: the handler ran but its response was too large or not
	// serializable; the record was completed without it.
	OutcomeNotStored
	// OutcomeResponseNotStored: a duplicate found a completed record without
	// a response (ErrResponseNotStored).
	OutcomeResponseNotStored
	// OutcomeLeaseLost: the handler ran, but its lease had been taken over, so
	// its completion or release was refused (fenced).
	OutcomeLeaseLost
	// OutcomeStoreError: the store failed. Event.HandlerRan tells whether this
	// was the claim (the handler did not run) or the completion/release.
	OutcomeStoreError
	// OutcomeRejected: the key, scope or payload could not be derived, or the
	// stored record is corrupt; the handler did not run.
	OutcomeRejected
	// OutcomeBypassed: the handler ran without idempotency (the key was empty
	// under WithOptionalKey, or IDEMKIT_DISABLED is set).
	OutcomeBypassed
)

var outcomeNames = [...]string{
	OutcomeExecuted:          "executed",
	OutcomeReplayed:          "replayed",
	OutcomeInProgress:        "in_progress",
	OutcomePayloadMismatch:   "payload_mismatch",
	OutcomeHandlerError:      "handler_error",
	OutcomeNotStored:         "not_stored",
	OutcomeResponseNotStored: "response_not_stored",
	OutcomeLeaseLost:         "lease_lost",
	OutcomeStoreError:        "store_error",
	OutcomeRejected:          "rejected",
	OutcomeBypassed:          "bypassed",
}

// String returns the outcome's stable snake_case name, used in logs and metrics.
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event is the report of one wrapped invocation.
type Event struct {
	// Outcome is what happened.
	Outcome Outcome
	// RecordID is the hashed storage key (empty when no key was derived).
	RecordID string
	// TookOver reports that this invocation took over a record whose owner
	// crashed or overran its lease (the handler ran again, by design).
	TookOver bool
	// Resumed reports that this invocation resumed a record its previous
	// owner suspended after a handler error, keeping its finished steps (see
	// Step): an ordinary retry, not a takeover.
	Resumed bool
	// FromCache reports a replay served by the local cache (no store call).
	FromCache bool
	// Shared reports a replay of the response another call for the same key
	// in this process had just run or replayed, while this one waited for it
	// (for its claim's answer, or with WithWaitInProgress for its run): no
	// store call.
	Shared bool
	// HandlerRan reports whether the handler ran in this invocation.
	HandlerRan bool
	// Duration is the time the invocation spent in the wrapper and handler.
	Duration time.Duration
	// Err is the error behind a failing outcome, if any.
	Err error
	// Trace, when the call found a completed record (a replay, and the
	// refusals that read one: a payload mismatch, a response not stored),
	// is the trace context that record keeps of the call that completed
	// it (storage.Record.Trace, see WithCallHook); empty when it keeps
	// none, and for a replay shared from another call in this process.
	Trace string
}

// Invocation describes the wrapped invocation a handler is running in.
type Invocation struct {
	// RecordID is the hashed storage key of this invocation's record.
	RecordID string
	// TookOver reports that this run took over a crashed or timed-out owner.
	TookOver bool
	// Resumed reports that this run resumed a record suspended after a
	// handler error: the steps it finished are answered from the record.
	Resumed bool
}

type invocationKey struct{}

// invocationCtx is the handler's context: the invocation's facts carried in
// the context value itself, one allocation instead of a value plus a
// context.WithValue node. The downstream key is derived only when asked for,
// keeping a hash off the hot path.
type invocationCtx struct {
	context.Context
	recordID string
	tookOver bool
	resumed  bool
	steps    stepLog
}

func (c *invocationCtx) Value(key any) any {
	if key == (invocationKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// FromContext returns the Invocation the handler runs in, if it was called by
// a wrapper.
func FromContext(ctx context.Context) (Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(*invocationCtx)
	if !ok {
		return Invocation{}, false
	}
	return Invocation{RecordID: inv.recordID, TookOver: inv.tookOver, Resumed: inv.resumed}, true
}

// DownstreamKey returns a stable key derived from the idempotency key of the
// handler's invocation: the same for every retry, replay and takeover of that
// key, distinct per prefix and scope, and not reversible to the record id.
// Pass it as the Idempotency-Key of external APIs. Inside a Step's function
// it returns the step's own key; outside a handler run by a front door, "".
func DownstreamKey(ctx context.Context) string {
	if key, ok := ctx.Value(stepKeyKey{}).(string); ok {
		return key
	}
	inv, ok := ctx.Value(invocationKey{}).(*invocationCtx)
	if !ok {
		return ""
	}
	return downstreamKey(inv.recordID)
}
