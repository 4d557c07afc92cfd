package idempotent_test

// The Step Functions examples of docs/choosing-keys.md: how to key a Lambda
// function that a state machine's Task state invokes. The documentation
// quotes them (internal/doccheck checks that the quotes match), and
// `go test` runs them.

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/idempotent"
)

// ChargeTask is what the state machine's Charge state passes to the
// function: its Parameters take the execution and state from the Context
// object ($$.Execution.Id, $$.State.Name, $$.State.RetryCount) and the order
// from the state's input.
type ChargeTask struct {
	ExecutionID string `json:"executionId"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"` // $$.State.RetryCount: for the logs, never the key
	OrderID     string `json:"orderId"`
	AmountCents int    `json:"amountCents"`
}

// A Retry re-invokes the task with a higher $$.State.RetryCount, so the whole
// input is a new key on every attempt. The execution ID and state name stay
// the same across the retries of one execution; a second execution for the
// same order (a caller that started the state machine again) has its own ID,
// and only a key the caller passes, the order, recognizes it.
func ExampleWithKey_stepFunctions() {
	charges := 0
	charge := func(ctx context.Context, t ChargeTask) (string, error) {
		charges++
		return fmt.Sprintf("ch-%d", charges), nil // the Charge state's output
	}
	byExecution := idempotent.WithKey(func(t ChargeTask) (string, error) {
		return t.ExecutionID + "#" + t.State, nil
	})
	byOrder := idempotent.WithKey(func(t ChargeTask) (string, error) { return t.OrderID, nil })
	sameCharge := idempotent.WithPayloadValidation(func(t ChargeTask) (any, error) {
		return []any{t.OrderID, t.AmountCents}, nil // not the attempt, nor the execution
	})

	first := ChargeTask{ExecutionID: "arn:aws:states:eu-west-1:123456789012:execution:checkout:o-1001-a",
		State: "Charge", OrderID: "o-1001", AmountCents: 500}
	retry := first // the Retry field invokes the state again
	retry.Attempt = 1
	again := first // a new execution, started again for the same order
	again.ExecutionID = "arn:aws:states:eu-west-1:123456789012:execution:checkout:o-1001-b"

	for _, c := range []struct {
		name string
		opts []idempotent.WrapOption[ChargeTask]
	}{
		{"the whole input", nil}, // the default key
		{"execution and state", []idempotent.WrapOption[ChargeTask]{byExecution}},
		{"the order", []idempotent.WrapOption[ChargeTask]{byOrder, sameCharge}},
	} {
		charges = 0
		h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("charge-order")), charge, c.opts...)
		for _, t := range []ChargeTask{first, retry, again} {
			_, _ = h(context.Background(), t)
		}
		fmt.Printf("keyed on %s: charges: %d\n", c.name, charges)
	}
	// Output:
	// keyed on the whole input: charges: 3
	// keyed on execution and state: charges: 2
	// keyed on the order: charges: 1
}

// LineItem is one element of the array a Map state iterates over.
type LineItem struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// ReserveTask is the input of one Map iteration: the Map state's
// ItemSelector passes the execution's ID and the item ($$.Map.Item.Value).
type ReserveTask struct {
	ExecutionID string   `json:"executionId"`
	Item        LineItem `json:"item"`
}

// Each iteration is keyed on the execution and the item's own ID. A redrive
// keeps the execution's ID and runs again only the iterations that failed:
// the failed one's record was released with its error, so it runs again.
func ExampleWithKey_stepFunctionsMap() {
	reserved := map[string]int{}
	outOfStock := map[string]bool{"BLUE-MUG": true}
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("reserve-stock"))
	reserve := idempotent.Wrap(engine, func(ctx context.Context, t ReserveTask) (string, error) {
		if outOfStock[t.Item.SKU] {
			return "", errors.New("out of stock") // the record is released
		}
		reserved[t.Item.SKU] += t.Item.Quantity
		return "reserved " + t.Item.SKU, nil
	}, idempotent.WithKey(func(t ReserveTask) (string, error) {
		return t.ExecutionID + "#" + t.Item.SKU, nil // the item's ID, not its place in the array
	}))

	ctx := context.Background()
	const execution = "arn:aws:states:eu-west-1:123456789012:execution:checkout:o-1001-a"
	items := []LineItem{{SKU: "RED-MUG", Quantity: 2}, {SKU: "BLUE-MUG", Quantity: 1}}
	var failed []LineItem
	for _, it := range items { // BLUE-MUG fails, and the execution with it
		if _, err := reserve(ctx, ReserveTask{ExecutionID: execution, Item: it}); err != nil {
			failed = append(failed, it)
		}
	}
	outOfStock["BLUE-MUG"] = false // restocked; the execution is redriven
	for _, it := range failed {
		_, _ = reserve(ctx, ReserveTask{ExecutionID: execution, Item: it})
	}
	// A done iteration invoked again (a Retry after an error that does not
	// say whether the function ran) replays instead of reserving twice.
	_, _ = reserve(ctx, ReserveTask{ExecutionID: execution, Item: items[0]})
	fmt.Println(reserved)
	// Output: map[BLUE-MUG:1 RED-MUG:2]
}
