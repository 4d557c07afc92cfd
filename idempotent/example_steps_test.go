package idempotent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/idempotent"
)

type payOrder struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

type payReceipt struct {
	ChargeID string `json:"chargeId"`
}

// A handler with two steps: a charge, then a ledger write that fails the
// first time. The retry gets the charge's recorded result back and only
// writes the ledger: the card is charged once.
func ExampleStep() {
	charges, ledgerDown := 0, true
	handler := func(ctx context.Context, o payOrder) (payReceipt, error) {
		chargeID, err := idempotent.Step(ctx, "charge", func(ctx context.Context) (string, error) {
			// Pass the step's own key to the payment provider.
			_ = idempotent.DownstreamKey(ctx)
			charges++
			return fmt.Sprintf("ch_%s", o.ID), nil
		})
		if err != nil {
			return payReceipt{}, err
		}
		if _, err := idempotent.Step(ctx, "ledger", func(ctx context.Context) (bool, error) {
			if ledgerDown {
				return false, errors.New("ledger unavailable")
			}
			return true, nil
		}); err != nil {
			return payReceipt{}, err
		}
		return payReceipt{ChargeID: chargeID}, nil
	}
	pay := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), handler,
		idempotent.WithKey(func(o payOrder) (string, error) { return o.ID, nil }),
		idempotent.WithPayloadValidation(func(o payOrder) (any, error) { return o, nil }))

	ctx := context.Background()
	_, err := pay(ctx, payOrder{ID: "o-1", Amount: 1500})
	fmt.Println("first run:", err)
	ledgerDown = false
	r, err := pay(ctx, payOrder{ID: "o-1", Amount: 1500})
	fmt.Println("retry:", r.ChargeID, err)
	fmt.Println("charges:", charges)
	// Output:
	// first run: ledger unavailable
	// retry: ch_o-1 <nil>
	// charges: 1
}
