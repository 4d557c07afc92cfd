package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/idempotent"
)

type ChargeRequest struct {
	OrderID string `json:"orderId"`
	Amount  int64  `json:"amount"`
}

type ChargeResult struct {
	ChargeID string `json:"chargeId"`
}

// Wrap a Lambda handler: the first invocation for an order charges the card,
// duplicates get the stored result.
func ExampleWrap() {
	charges := 0
	chargeCard := func(ctx context.Context, req ChargeRequest) (ChargeResult, error) {
		charges++
		return ChargeResult{ChargeID: fmt.Sprintf("ch_%d", charges)}, nil
	}

	store := idempotent.NewMemoryStore() // dynamostore.New(...) in production
	engine := idempotent.New(store)      // the core's settings, once
	handler := idempotent.Wrap(engine, chargeCard,
		idempotent.WithKey(func(r ChargeRequest) (string, error) { return r.OrderID, nil }),
		idempotent.WithPayloadValidation(func(r ChargeRequest) (any, error) { return r.Amount, nil }))
	// In a Lambda function: lambda.Start(handler)

	first, _ := handler(context.Background(), ChargeRequest{OrderID: "order-1", Amount: 1500})
	retry, _ := handler(context.Background(), ChargeRequest{OrderID: "order-1", Amount: 1500})
	_, err := handler(context.Background(), ChargeRequest{OrderID: "order-1", Amount: 9900})
	fmt.Println(first.ChargeID, retry.ChargeID, charges)
	fmt.Println(errors.Is(err, idempotent.ErrPayloadMismatch))
	// Output:
	// ch_1 ch_1 1
	// true
}

// Make one side effect inside a larger handler idempotent: wrap the function
// that performs it, with its own prefix so its keys never meet the handler's.
func ExampleWrap_function() {
	store := idempotent.NewMemoryStore()
	emails := 0
	engine := idempotent.New(store, idempotent.WithPrefix("send-receipt"))
	sendReceipt := idempotent.Wrap(engine, func(ctx context.Context, orderID string) (string, error) {
		emails++
		return "sent receipt for " + orderID, nil
	}, idempotent.WithKey(func(id string) (string, error) { return id, nil }))

	handler := func(ctx context.Context, orderID string) (string, error) {
		// ... work that may safely repeat ...
		return sendReceipt(ctx, orderID)
	}
	for range 3 {
		msg, _ := handler(context.Background(), "order-7")
		fmt.Println(msg)
	}
	fmt.Println("emails sent:", emails)
	// Output:
	// sent receipt for order-7
	// sent receipt for order-7
	// sent receipt for order-7
	// emails sent: 1
}

// The wrapped handler has the shape lambda.Start and lambda.StartHandlerFunc
// expect; lambda.NewHandler shows the same path Lambda uses.
func ExampleWrap_lambda() {
	store := idempotent.NewMemoryStore()
	runs := 0
	wrapped := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, req ChargeRequest) (ChargeResult, error) {
		runs++
		return ChargeResult{ChargeID: "ch_" + req.OrderID}, nil
	}, idempotent.WithKey(func(r ChargeRequest) (string, error) { return r.OrderID, nil }))

	h := lambda.NewHandler(wrapped) // lambda.Start(wrapped) inside Lambda
	for range 2 {
		out, err := h.Invoke(context.Background(), []byte(`{"orderId":"42","amount":100}`))
		fmt.Println(string(out), err, runs)
	}
	// Output:
	// {"chargeId":"ch_42"} <nil> 1
	// {"chargeId":"ch_42"} <nil> 1
}

// Pass the downstream key to external APIs, so that even a re-execution after
// a crashed owner's lease was taken over does not charge twice.
func ExampleDownstreamKey() {
	store := idempotent.NewMemoryStore()
	engine := idempotent.New(store, idempotent.WithPrefix("payments"))
	handler := idempotent.Wrap(engine, func(ctx context.Context, req ChargeRequest) (ChargeResult, error) {
		key := idempotent.DownstreamKey(ctx) // e.g. the processor's Idempotency-Key header
		return ChargeResult{ChargeID: "ch_" + key[:8]}, nil
	}, idempotent.WithKey(func(r ChargeRequest) (string, error) { return r.OrderID, nil }))
	out, _ := handler(context.Background(), ChargeRequest{OrderID: "A"})
	fmt.Println(len(out.ChargeID))
	// Output: 11
}

// Count outcomes for metrics with one hook.
func ExampleWithOutcomeHook() {
	counts := map[string]int{}
	store := idempotent.NewMemoryStore()
	engine := idempotent.New(store, idempotent.WithOutcomeHook(func(ctx context.Context, e idempotent.Event) {
		counts[e.Outcome.String()]++
	}))
	handler := idempotent.Wrap(engine, func(ctx context.Context, id string) (string, error) { return id, nil },
		idempotent.WithKey(func(id string) (string, error) { return id, nil }))
	for _, id := range []string{"a", "a", "b", ""} {
		_, _ = handler(context.Background(), id)
	}
	fmt.Println(counts)
	// Output: map[executed:2 rejected:1 replayed:1]
}

// Wait for an in-flight duplicate instead of failing fast with ErrInProgress.
func ExampleWithWaitInProgress() {
	store := idempotent.NewMemoryStore()
	engine := idempotent.New(store, idempotent.WithWaitInProgress(3*time.Second))
	handler := idempotent.Wrap(engine, func(ctx context.Context, id string) (string, error) {
		return "done " + id, nil
	}, idempotent.WithKey(func(id string) (string, error) { return id, nil }))
	out, err := handler(context.Background(), "x")
	fmt.Println(out, err)
	// Output: done x <nil>
}
