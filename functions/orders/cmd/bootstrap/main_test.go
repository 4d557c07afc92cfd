package main

import (
	"os"
	"testing"

	"github.com/idemkit/idemkit/functions/internal/lambdatest"
)

func TestMain(m *testing.M) {
	lambdatest.RunMainIfChild(main)
	os.Exit(m.Run())
}

// TestFailsFast: without its tables the function stops at start-up with one
// JSON log line that names what is missing, before any invocation.
func TestFailsFast(t *testing.T) {
	t.Parallel()
	lambdatest.AssertFailsFast(t, "IDEMPOTENCY_TABLE", "INVENTORY_TABLE")
}
