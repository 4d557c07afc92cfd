package storage

import (
	"context"
	"errors"
	"fmt"
)

// TxStore is a Store whose completion can carry the handler's own writes:
// the writes and the fenced completion commit in one atomic operation, or
// none of them does. An optional capability, discovered with a type assertion
// as StepStore is. The engine begins a run's Tx only when the handler asks for
// it (through the store's own accessor, such as dynamostore.Transaction,
// which calls TxFromContext), at most once per run, and settles it when the
// handler returns: Commit after a success, Rollback after a failure.
type TxStore interface {
	Store

	// BeginTx opens the pending writes of one run of a handler: the run that
	// owns the INPROGRESS record id with lease. Both are "" for a run without
	// a record (idempotency disabled, or a call without a key under
	// WithOptionalKey): its Tx then commits the writes alone.
	BeginTx(ctx context.Context, id, lease string) (Tx, error)
}

// Tx holds one run's writes until the engine settles the run. The store
// defines what a write is and how the handler adds one (a DynamoDB
// TransactWriteItem, a statement in a PostgreSQL transaction); methods that
// add writes must be safe for concurrent use.
type Tx interface {
	// Commit overwrites the record exactly as Store.Complete does and
	// commits the writes, in one atomic operation conditioned on rec.Lease;
	// with a zero rec (a run without a record) it commits the writes alone.
	// Its error says what happened, and the engine relies on it:
	//   - wrapping ErrLeaseLost: the record is gone or has another lease;
	//     nothing committed;
	//   - wrapping ErrTxAborted: a condition of the handler's own writes
	//     failed (or the database refused them); nothing committed;
	//   - wrapping ErrTxRefused: the database refused the request as a
	//     whole (invalid, a table that does not exist, access denied, an
	//     operation it does not have); nothing committed;
	//   - wrapping ErrTooLarge: nothing was written, and Commit may be called
	//     again with a smaller record;
	//   - any other error: the outcome is unknown (the store cannot tell
	//     whether the commit reached the database). The engine then settles
	//     it with Release (or Suspend) under the run's lease, which must
	//     order itself after any Commit still in flight: a Commit that comes
	//     after it must find the record's fence broken and commit nothing,
	//     and one that committed before it must leave the record COMPLETED
	//     under the lease (ErrAlreadyCompleted).
	// A retried Commit after a lost response must not apply the writes twice.
	Commit(ctx context.Context, rec Record) error

	// Rollback discards the writes; the record is untouched (the engine
	// releases or suspends it next). It is safe after a failed Commit and
	// when nothing was added.
	Rollback(ctx context.Context) error
}

var (
	// ErrTxAborted: the handler's own writes could not commit (a condition
	// of theirs failed, say stock would go negative), so nothing committed:
	// neither the writes nor the completion. The engine releases the record
	// as after a handler error and returns the error to the caller; the
	// store's error (wrapping this one) says which write failed and why.
	ErrTxAborted = errors.New("idempotent: the handler's writes did not commit")

	// ErrTxRefused: the database refused the transaction's request as a
	// whole, before applying any of it: the request is invalid, names a
	// table that does not exist, is not allowed to the caller's credentials,
	// or uses an operation the server does not have (DynamoDB's
	// ValidationException, ResourceNotFoundException, AccessDeniedException,
	// UnknownOperationException). Nothing committed. A configuration or
	// programming error, not an outage: the engine releases the record at
	// once and returns the error (the store's typed error, wrapping this
	// one, names the refusal); the HTTP doors answer 500. Retrying the same
	// request fails the same way until the configuration is fixed.
	ErrTxRefused = errors.New("idempotent: the database refused the transaction")

	// ErrNoTx: there is no transaction to add writes to here: outside a
	// handler run by an idempotent front door, with a store that is not a
	// TxStore (or not the store asked), inside a Step's function (a resumed
	// run answers the step from its record without running it, so its writes
	// would be lost), or after the handler returned. Nothing was added. A
	// programmer error: fix the handler.
	ErrNoTx = errors.New("idempotent: no transaction here")
)

// TxOpener opens the transaction of one handler run; the engine puts one in
// the handler's context (ContextWithTx).
type TxOpener interface {
	// OpenTx returns the run's Tx, beginning it on first use; ctx is the
	// context the handler asked with. Errors wrap ErrNoTx or the store's.
	OpenTx(ctx context.Context) (Tx, error)
}

type txKey struct{}

// ContextWithTx returns a copy of parent that carries o, for TxFromContext.
func ContextWithTx(parent context.Context, o TxOpener) context.Context {
	return context.WithValue(parent, txKey{}, o)
}

// TxFromContext returns the Tx of the handler run ctx belongs to, beginning it
// on first use. Stores wrap it in an accessor of their own type (the handler
// never calls it); outside a run with a transaction it returns an error
// wrapping ErrNoTx.
func TxFromContext(ctx context.Context) (Tx, error) {
	o, ok := ctx.Value(txKey{}).(TxOpener)
	if !ok {
		return nil, fmt.Errorf("%w: not inside a handler run by an idempotent front door over a store with transactions (storage.TxStore)", ErrNoTx)
	}
	return o.OpenTx(ctx)
}
