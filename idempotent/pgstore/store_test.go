package pgstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/idempotent/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	storetest.Run(t, store)
}
