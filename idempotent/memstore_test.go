package idempotent_test

import (
	"testing"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, idempotent.NewMemoryStore())
}

func TestZeroMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, &idempotent.MemoryStore{})
}
