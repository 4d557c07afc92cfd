package idempotent_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/idemkit/idemkit/idempotent"
)

// A front door for an event that carries many calls (here, the notifications
// of one delivery) claims them in one wave, runs them in order, and closes the
// Batch before it answers: the duplicate in the delivery is answered from the
// first one's record, and a redelivery replays both.
func ExampleEngine_ClaimBatch() {
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("notify"),
		idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	deliver := func(ctx context.Context, ids []string) {
		calls := make([]idempotent.Call, len(ids))
		for i, id := range ids {
			calls[i] = idempotent.Call{Key: id}
		}
		batch := engine.ClaimBatch(ctx, calls)
		defer batch.Close(ctx)
		for i, id := range ids {
			res, err := batch.Do(ctx, i, func(context.Context) ([]byte, error) {
				fmt.Println("sending", id)
				return []byte(`"sent"`), nil
			})
			fmt.Printf("%s: ran %v, %s, %v\n", id, res.Ran, res.Response, err)
		}
	}
	deliver(context.Background(), []string{"n-1", "n-2", "n-1"})
	deliver(context.Background(), []string{"n-2"})
	// Output:
	// sending n-1
	// n-1: ran true, "sent", <nil>
	// sending n-2
	// n-2: ran true, "sent", <nil>
	// n-1: ran false, "sent", <nil>
	// n-2: ran false, "sent", <nil>
}
