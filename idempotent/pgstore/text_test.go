package pgstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/texttest"
)

// TestTextNoStoreCanHold: text PostgreSQL's text cannot hold is refused by
// the engine before anything runs, as on every store: a prefix with a NUL
// byte when idempotent.New runs (never ErrStore on every call), a step name
// with one with idempotent.ErrInvalidStep before the step's function runs
// (never run, then refused by the store, and run again on every retry).
func TestTextNoStoreCanHold(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	texttest.Run(t, store)
}
