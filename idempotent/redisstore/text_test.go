package redisstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/texttest"
)

// TestTextNoStoreCanHold: text some store cannot hold is refused by the
// engine before anything runs, on Redis as on every store (Redis itself
// would hold it).
func TestTextNoStoreCanHold(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	texttest.Run(t, store)
}
