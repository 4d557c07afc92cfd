package main

import (
	"fmt"
	"slices"
)

// storySteps are the story's steps in the order they run: step n is
// storySteps[n-1]. The demo prints the numbers; everything else names a step.
// The demo's own texts take a step's number from stepNumber, and the
// documentation writes the number followed by a marker with the step's name:
//
//	`make demo` (steps 18 and 19<!-- demo-step: receipts-checkpoint receipts-redelivery -->)
//
// TestStepReferences (steps_test.go) checks every such reference against this
// list, and fails on a reference to the demo's steps without a marker;
// TestDemo checks that the story runs exactly these steps, in this order. So a
// step added, removed or moved here fails the tests until every reference it
// renumbers says the new number.
var storySteps = []string{
	// Payments API (API Gateway HTTP API v2 events): story.go and tx.go
	"new-payment", "replay", "concurrent-duplicates", "different-body", "missing-key",
	"invalid-bodies", "malformed-json", "second-caller", "crash-after-charge", "stale-owner",
	// Orders consumer (SQS): story.go and tx.go
	"orders-batch", "orders-redelivery", "out-of-stock",
	// The payments API as a net/http server: web.go
	"web-new", "web-concurrent", "web-different-body", "web-missing-key",
	// Receipts on the payments table's stream: receipts.go
	"receipts-checkpoint", "receipts-redelivery",
}

// stepNumber returns the number of the step named name. An unknown name is a
// programming error of the demo, which TestDemo finds.
func stepNumber(name string) int {
	i := slices.Index(storySteps, name)
	if i < 0 {
		panic(fmt.Sprintf("demo: no step named %q in storySteps", name))
	}
	return i + 1
}
