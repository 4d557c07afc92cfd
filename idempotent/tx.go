package idempotent

import (
	"context"
	"fmt"
	"sync"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// txRun is the transaction slot of one run over a storage.TxStore: the
// handler's first ask begins the store's Tx (storage.TxFromContext, through
// the store's accessor); the engine takes it back when the handler returns
// and commits it with the completion, or rolls it back. A run that never asks
// costs the store nothing.
type txRun struct {
	store     storage.TxStore
	id, lease string // "" for a run without a record

	mu    sync.Mutex
	tx    storage.Tx
	ended bool
}

// OpenTx implements storage.TxOpener.
func (t *txRun) OpenTx(ctx context.Context) (storage.Tx, error) {
	if ctx.Value(stepKeyKey{}) != nil {
		return nil, fmt.Errorf("%w: inside a step's function: a resumed run answers the step from its record without running it, so writes added there would be lost; add them outside the step", storage.ErrNoTx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, fmt.Errorf("%w: the handler already returned", storage.ErrNoTx)
	}
	if t.tx == nil {
		tx, err := t.store.BeginTx(ctx, t.id, t.lease)
		if err != nil {
			return nil, fmt.Errorf("%w: begin the transaction: %w", ErrStore, err)
		}
		t.tx = tx
	}
	return t.tx, nil
}

// end closes the slot, so that nothing begins after the handler returned,
// and returns the Tx the run began, if any. Nil-safe: a run over a store
// without transactions has no slot.
func (t *txRun) end() storage.Tx {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	return t.tx
}

// withTx gives ctx a transaction slot when the store has transactions.
func (e *Engine) withTx(ctx context.Context, id, lease string) (context.Context, *txRun) {
	if e.txs == nil {
		return ctx, nil
	}
	return e.withTxIn(ctx, new(txRun), id, lease)
}

// withTxIn is withTx, its transaction kept in t, which it resets.
func (e *Engine) withTxIn(ctx context.Context, t *txRun, id, lease string) (context.Context, *txRun) {
	if e.txs == nil {
		return ctx, nil
	}
	t.store, t.id, t.lease, t.tx, t.ended = e.txs, id, lease, nil, false
	return storage.ContextWithTx(ctx, t), t
}

// rollback discards a run's writes after its handler failed; the error is
// only reported (the writes never committed either way).
func (e *Engine) rollback(ctx context.Context, tx storage.Tx) error {
	if tx == nil {
		return nil
	}
	fctx, cancel := finishContext(ctx)
	defer cancel()
	if err := tx.Rollback(fctx); err != nil {
		return fmt.Errorf("%w: roll back the handler's writes: %w", ErrStore, err)
	}
	return nil
}
