package idempotent_test

// The lease arithmetic of docs/guarantees.md, which quotes this example
// (internal/doccheck checks that the quote matches); `go test` checks the
// numbers.

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// leaseSpy is a MemoryStore that remembers the lease end of the last claim.
type leaseSpy struct {
	storage.StepStore
	leaseEnd time.Time
}

func (s *leaseSpy) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.leaseEnd = rec.LeaseExpiresAt
	return s.StepStore.Claim(ctx, rec, now)
}

// The lease stored in the record ends at the invocation's deadline, or
// WithMaxLease after the claim if that comes first, plus the clock-skew
// margin (2 s). The handler's context ends a reserve (1 s, or a quarter of
// a budget under 4 s) before the budget does, so the owner has stopped, and
// completed its record, before anyone may take it over.
func ExampleWithMaxLease() {
	now := time.Unix(1_800_000_000, 0)
	run := func(timeout time.Duration, opts ...idempotent.Option) {
		spy := &leaseSpy{StepStore: idempotent.NewMemoryStore()}
		var handlerTime time.Duration
		engine := idempotent.New(spy, append(opts, idempotent.WithClock(func() time.Time { return now }))...)
		h := idempotent.Wrap(engine, func(ctx context.Context, id string) (string, error) {
			dl, _ := ctx.Deadline()
			handlerTime = time.Until(dl).Round(100 * time.Millisecond) // a few ms have passed
			if handlerTime > 5*time.Second {
				handlerTime = handlerTime.Round(time.Second)
			}
			return id, nil
		}, idempotent.WithKey(func(id string) (string, error) { return id, nil }))

		ctx, cancel := context.WithTimeout(context.Background(), timeout) // Lambda's deadline
		defer cancel()
		_, _ = h(ctx, "order-1")
		fmt.Printf("timeout %v: handler gets %v, lease ends %v after the claim\n",
			timeout, handlerTime, spy.leaseEnd.Sub(now).Round(time.Second))
	}
	run(30 * time.Second)                                        // an SQS consumer
	run(60*time.Second, idempotent.WithMaxLease(29*time.Second)) // behind API Gateway's 29 s
	run(3 * time.Second)                                         // a short budget: the reserve is a quarter
	// Output:
	// timeout 30s: handler gets 29s, lease ends 32s after the claim
	// timeout 1m0s: handler gets 28s, lease ends 31s after the claim
	// timeout 3s: handler gets 2.2s, lease ends 5s after the claim
}
