package sqsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// txStore is a storage.TxStore over the memory store whose writes are
// strings; commitErr, when it names a write, fails the commit holding it.
type txStore struct {
	storage.Store

	mu        sync.Mutex
	commitErr map[string]error
	committed []string
}

func (s *txStore) BeginTx(context.Context, string, string) (storage.Tx, error) {
	return &stringTx{s: s}, nil
}

type stringTx struct {
	s       *txStore
	pending []string // added by one handler goroutine
}

func (t *stringTx) Commit(ctx context.Context, rec storage.Record) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, w := range t.pending {
		if err := t.s.commitErr[w]; err != nil {
			return err
		}
	}
	if rec.ID != "" {
		if err := t.s.Complete(ctx, rec); err != nil {
			return err
		}
	}
	t.s.committed = append(t.s.committed, t.pending...)
	return nil
}

func (t *stringTx) Rollback(context.Context) error { t.pending = nil; return nil }

// A message whose writes did not commit is a batch item failure, whatever
// the reason: its writes aborted (the record was released), its lease was
// lost (the new owner's replay answers its redelivery), or the outcome was
// unknown (settled by the record's fence: given back, nothing committed).
func TestTxUncommittedMessagesAreBatchItemFailures(t *testing.T) {
	store := &txStore{Store: idempotent.NewMemoryStore(), commitErr: map[string]error{
		"write o-aborted": fmt.Errorf("%w: stock would go negative", storage.ErrTxAborted),
		"write o-unknown": errors.New("connection reset"),
		"write o-lost":    fmt.Errorf("the record has another lease: %w", storage.ErrLeaseLost),
	}}
	runs := map[string]int{}
	var mu sync.Mutex
	h := sqsbatch.Wrap(idempotent.New(store, idempotent.WithMaxLease(time.Minute)), func(ctx context.Context, o order) error {
		mu.Lock()
		runs[o.OrderID]++
		mu.Unlock()
		tx, err := storage.TxFromContext(ctx)
		if err != nil {
			return err
		}
		tx.(*stringTx).pending = append(tx.(*stringTx).pending, "write "+o.OrderID)
		return nil
	}, sqsbatch.WithKey(byOrderID))

	resp, err := h(t.Context(), batch(
		msg("m1", body("o-ok", 1)),
		msg("m2", body("o-aborted", 1)),
		msg("m3", body("o-unknown", 1)),
		msg("m4", body("o-lost", 1)),
	))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"m2", "m3", "m4"}, failedIDs(resp))
	assert.Equal(t, []string{"write o-ok"}, store.committed)

	// Redelivered: the aborted message runs again (its record was
	// released), and so does the one whose outcome was unknown: the settle
	// gave its record back at once, so it is not in progress for a lease.
	store.commitErr = nil
	resp, err = h(t.Context(), batch(msg("m1", body("o-ok", 1)), msg("m2", body("o-aborted", 1)), msg("m3", body("o-unknown", 1))))
	require.NoError(t, err)
	assert.Empty(t, failedIDs(resp))
	// In no fixed order: a standard queue's messages run side by side.
	assert.ElementsMatch(t, []string{"write o-ok", "write o-aborted", "write o-unknown"}, store.committed)
	assert.Equal(t, map[string]int{"o-ok": 1, "o-aborted": 2, "o-unknown": 2, "o-lost": 1}, runs)
}
