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

func TestConformanceOfAStoreWithoutSteps(t *testing.T) {
	// The suite runs the base contract on a plain Store and skips the
	// StepStore cases.
	storetest.Run(t, plainStore{idempotent.NewMemoryStore()})
}
