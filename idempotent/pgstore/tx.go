package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// ErrTxOwned is returned (wrapped) by Commit and Rollback of the pgx.Tx that
// Tx gives a handler: the engine commits that transaction with the run's
// completion, or rolls it back after the handler failed. Return an error
// from the handler to discard its writes. Nested transactions (the pgx.Tx's
// Begin: savepoints) are the handler's to commit or roll back.
var ErrTxOwned = errors.New("pgstore: the idempotent engine commits or rolls back this transaction with the run's record")

// Tx returns the PostgreSQL transaction of the handler run ctx belongs to,
// beginning it on the first call (later calls return the same one). The
// handler runs its SQL in it; when the handler returns, the engine runs the
// record's completion (UPDATE … WHERE lease = $lease) in the same
// transaction and commits it, or rolls it back after a handler error. So the
// handler's writes commit together with its record, or not at all: an
// owner whose lease was taken over while it ran commits nothing.
//
// The transaction holds one of the pool's connections from this call until
// the engine settles the run (see the package documentation on pool
// sizing). Use it from one goroutine at a time, as any pgx.Tx; its Commit
// and Rollback return an error wrapping ErrTxOwned.
//
// Outside a handler run by an idempotent front door over a pgstore.Store,
// inside a Step's function, or after the handler returned, the error wraps
// storage.ErrNoTx (idempotent.ErrNoTx).
func Tx(ctx context.Context) (pgx.Tx, error) {
	t, err := storage.TxFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	rt, ok := t.(*runTx)
	if !ok {
		return nil, fmt.Errorf("pgstore: %w: the run's store is not a pgstore.Store (its transaction is a %T)", storage.ErrNoTx, t)
	}
	return rt.handler, nil
}

// BeginTx implements storage.TxStore: it begins a READ COMMITTED
// transaction on the Store's pool, which the handler gets through Tx. id and
// lease name the run's record ("" for a run without one: its Commit then
// commits the writes alone).
//
// READ COMMITTED is what makes the lease fence exact: the completion's
// UPDATE … WHERE lease = $lease reads the record's latest committed version
// (waiting for a concurrent claim that holds its row), so it finds the
// caller's lease only if no takeover committed first, and a takeover that
// comes later waits for this transaction to end.
func (s *Store) BeginTx(ctx context.Context, id, lease string) (storage.Tx, error) {
	tx, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &runTx{store: s, id: id, lease: lease, tx: tx, handler: handlerTx{tx}}, nil
}

// runTx is one run's transaction: storage.Tx for the engine.
type runTx struct {
	store     *Store
	id, lease string
	tx        pgx.Tx
	handler   handlerTx

	mu    sync.Mutex
	state txState
	err   error // why the transaction ended without committing
}

type txState int

const (
	txOpen txState = iota
	txCommitted
	txEnded // rolled back, or failed: err says why
)

// Commit implements storage.Tx. With a record, it runs the completion
// (completeSQL) in the transaction, then commits:
//   - the completion updates no row: the lease was lost (the record is gone
//     or another claim took it over); the transaction is rolled back and the
//     error wraps storage.ErrLeaseLost;
//   - PostgreSQL refuses the completion or the COMMIT (the handler's
//     statement failed and the transaction is aborted; a deferred
//     constraint fails at COMMIT; a serialization failure or deadlock): the
//     error wraps storage.ErrTxAborted and the *pgconn.PgError (or
//     pgx.ErrTxCommitRollback), and nothing committed; a refusal a retry
//     does not change (SQLSTATE class 42 or 28: an undefined table or
//     column, insufficient privilege) wraps storage.ErrTxRefused instead;
//   - a record larger than Options.MaxItemBytes: storage.ErrTooLarge before
//     any call; the transaction stays open.
//
// Any other error (the connection failed) leaves the outcome unknown; the
// engine then settles it with Release or Suspend, whose statement waits for
// this transaction's COMMIT if the server is still running it (it holds the
// record's row from the completion's UPDATE on) and decides on what it
// committed (docs/transactions.md). A
// Commit after a successful one commits nothing more: it completes the
// record again, fenced on its lease (Store.Complete), so a retry succeeds
// without applying the writes twice.
func (t *runTx) Commit(ctx context.Context, rec storage.Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case txCommitted:
		if rec.ID == "" {
			return nil
		}
		return t.store.Complete(ctx, rec)
	case txEnded:
		return fmt.Errorf("pgstore: commit: the transaction already ended: %w", t.err)
	}
	if rec.ID != "" {
		if err := t.store.checkComplete(&rec); err != nil {
			return fmt.Errorf("pgstore: commit: %w", err)
		}
		if err := t.store.complete(ctx, t.tx, &rec, "commit"); err != nil {
			if !errors.Is(err, storage.ErrLeaseLost) {
				err = classify(err)
			}
			return t.end(ctx, err)
		}
	}
	if err := t.tx.Commit(ctx); err != nil {
		t.state, t.err = txEnded, classify(fmt.Errorf("pgstore: commit: %w", err))
		return t.err
	}
	t.state = txCommitted
	return nil
}

// end rolls the transaction back after err, which it returns (with the
// rollback's error, if any, joined: the outcome is still err's).
func (t *runTx) end(ctx context.Context, err error) error {
	t.state, t.err = txEnded, err
	if rerr := t.tx.Rollback(ctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
		return fmt.Errorf("%w (and the rollback failed: %v)", err, rerr)
	}
	return err
}

// refused reports whether SQLSTATE code says PostgreSQL refused a
// statement for a reason a retry does not change: class 42 (a syntax error or
// access rule violation: an undefined table or column, insufficient
// privilege) or 28 (invalid authorization).
func refused(code string) bool {
	return strings.HasPrefix(code, "42") || strings.HasPrefix(code, "28")
}

// classify marks err, an error of the handler's transaction, as
// storage.ErrTxAborted when PostgreSQL refused the transaction, so that
// nothing of it committed: a *pgconn.PgError (PostgreSQL answers an error
// and ends the transaction; a COMMIT that fails rolls back), or
// pgx.ErrTxCommitRollback (COMMIT of a transaction a failed statement had
// aborted). A refusal (see refused) is storage.ErrTxRefused instead. Any
// other error is returned as it is: the outcome is unknown.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && refused(pgErr.Code) {
		return fmt.Errorf("%w: %w", storage.ErrTxRefused, err)
	}
	if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return fmt.Errorf("%w: %w", storage.ErrTxAborted, err)
	}
	return err
}

// Rollback implements storage.Tx: it rolls the transaction back (the record
// is untouched). Safe after a failed Commit, and more than once.
func (t *runTx) Rollback(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != txOpen {
		return nil
	}
	t.state, t.err = txEnded, errors.New("rolled back")
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: rollback: %w", err)
	}
	return nil
}

// handlerTx is the pgx.Tx a handler gets: the run's transaction, whose
// Commit and Rollback are the engine's.
type handlerTx struct{ pgx.Tx }

// Commit refuses: the engine commits the transaction with the record.
func (handlerTx) Commit(context.Context) error {
	return fmt.Errorf("%w: return from the handler instead", ErrTxOwned)
}

// Rollback refuses: the engine rolls the transaction back when the handler
// returns an error.
func (handlerTx) Rollback(context.Context) error {
	return fmt.Errorf("%w: return an error from the handler to discard its writes", ErrTxOwned)
}
