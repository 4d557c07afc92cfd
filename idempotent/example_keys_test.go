package idempotent_test

// The examples of docs/choosing-keys.md: how to key the events Lambda
// delivers. The documentation quotes them (internal/doccheck checks that the
// quotes match), and `go test` runs them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
)

// The default key, the whole input, is wrong for Lambda's event types: a
// retry of the same request reaches the function as a new event, with a new
// request ID and time, so it never matches. Key on what the client repeats.
func ExampleWrap_wholeEventKey() {
	runs := 0
	createOrder := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (string, error) {
		runs++
		return "created", nil
	}
	// A client sends a request, times out, and sends it again: API Gateway
	// gives the retry its own request ID and time.
	first := events.APIGatewayV2HTTPRequest{
		Headers: map[string]string{"idempotency-key": "c0ffee-1"},
		Body:    `{"sku":"RED-MUG"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "Jq9aXhDoIAMEV1A=", TimeEpoch: 1767225600000},
	}
	retry := first
	retry.RequestContext.RequestID, retry.RequestContext.TimeEpoch = "Jq9bDjQ5oAMEMsQ=", 1767225603000

	engine := idempotent.New(idempotent.NewMemoryStore())
	wholeEvent := idempotent.Wrap(engine, createOrder)
	_, _ = wholeEvent(context.Background(), first)
	_, _ = wholeEvent(context.Background(), retry)
	fmt.Println("whole event as key, handler runs:", runs)

	runs = 0
	byHeader := idempotent.Wrap(engine, createOrder, idempotent.WithKey(func(req events.APIGatewayV2HTTPRequest) (string, error) {
		return req.Headers["idempotency-key"], nil
	}))
	_, _ = byHeader(context.Background(), first)
	_, _ = byHeader(context.Background(), retry)
	fmt.Println("Idempotency-Key header as key, handler runs:", runs)
	// Output:
	// whole event as key, handler runs: 2
	// Idempotency-Key header as key, handler runs: 1
}

// OrderPlaced is the detail of an EventBridge event.
type OrderPlaced struct {
	OrderID string `json:"orderId"`
}

// EventBridge keeps an event's id across its own retries, but a producer
// that calls PutEvents again (after a timeout, say) sends a new event with a
// new id. Key on the business identifier in the detail when that matters;
// the event id covers only EventBridge's and Lambda's retries.
func ExampleWithKey_eventBridge() {
	runs := 0
	handle := func(ctx context.Context, ev events.EventBridgeEvent) (string, error) {
		runs++
		return "shipped", nil
	}
	byOrder := idempotent.WithKey(func(ev events.EventBridgeEvent) (string, error) {
		var d OrderPlaced
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return "", err // ErrInvalidKey: the handler does not run
		}
		return d.OrderID, nil
	})
	byEventID := idempotent.WithKey(func(ev events.EventBridgeEvent) (string, error) { return ev.ID, nil })

	sent := events.EventBridgeEvent{ID: "6f2c9d1e-0001", DetailType: "OrderPlaced", Source: "shop.orders",
		Time: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), Detail: json.RawMessage(`{"orderId":"o-1001"}`)}
	sentAgain := sent // the producer's retry: same detail, new event
	sentAgain.ID, sentAgain.Time = "6f2c9d1e-0002", sent.Time.Add(2*time.Second)

	for _, c := range []struct {
		name string
		key  idempotent.WrapOption[events.EventBridgeEvent]
	}{{"event id", byEventID}, {"detail orderId", byOrder}} {
		runs = 0
		h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("ship-order")), handle, c.key)
		for _, ev := range []events.EventBridgeEvent{sent, sent, sentAgain} { // a Lambda retry, then the producer's
			_, _ = h(context.Background(), ev)
		}
		fmt.Printf("keyed on %s: handler runs: %d\n", c.name, runs)
	}
	// Output:
	// keyed on event id: handler runs: 2
	// keyed on detail orderId: handler runs: 1
}

// S3 may deliver a notification more than once. An object version is
// identified by bucket, key and version ID (versioned buckets) or sequencer
// (which orders the events of one key): key on those, one record at a time.
func ExampleWithKey_s3() {
	thumbnails := 0
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("thumbnail"))
	makeThumbnail := idempotent.Wrap(engine, func(ctx context.Context, r events.S3EventRecord) (string, error) {
		thumbnails++
		return "thumbs/" + r.S3.Object.URLDecodedKey, nil
	}, idempotent.WithKey(func(r events.S3EventRecord) (string, error) {
		version := r.S3.Object.VersionID
		if version == "" {
			version = r.S3.Object.Sequencer
		}
		return r.S3.Bucket.Name + "/" + r.S3.Object.Key + "@" + version, nil
	}))
	handler := func(ctx context.Context, ev events.S3Event) error {
		for _, r := range ev.Records {
			if _, err := makeThumbnail(ctx, r); err != nil {
				return err // Lambda retries the event; records already done are replayed
			}
		}
		return nil
	}

	upload := func(sequencer string) events.S3Event {
		var r events.S3EventRecord
		r.EventName = "ObjectCreated:Put"
		r.S3.Bucket.Name = "photos"
		r.S3.Object.Key, r.S3.Object.URLDecodedKey, r.S3.Object.Sequencer = "cat.jpg", "cat.jpg", sequencer
		return events.S3Event{Records: []events.S3EventRecord{r}}
	}
	_ = handler(context.Background(), upload("0055AED6DCD90281E5")) // the upload
	_ = handler(context.Background(), upload("0055AED6DCD90281E5")) // the same notification again
	_ = handler(context.Background(), upload("0055AED6DCD90281F7")) // cat.jpg overwritten: a new object version
	fmt.Println("thumbnails made:", thumbnails)
	// Output: thumbnails made: 2
}

// Tenant is who is calling, as an authorizer establishes it.
type Tenant struct{ ID string }

type tenantKey struct{}

// Scope keys to the caller, so that two callers who happen to send the same
// key never share a record: neither replays the other's response.
func ExampleWithScope() {
	runs := 0
	engine := idempotent.New(idempotent.NewMemoryStore())
	h := idempotent.Wrap(engine, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (string, error) {
		runs++
		return "ok", nil
	}, idempotent.WithKey(func(req events.APIGatewayV2HTTPRequest) (string, error) {
		return req.Headers["idempotency-key"], nil
	}), idempotent.WithScope(func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (string, error) {
		tenant, ok := ctx.Value(tenantKey{}).(Tenant) // set by your authentication
		if !ok {
			return "", errors.New("no tenant")
		}
		return tenant.ID, nil
	}))
	req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": "1"}}
	acme := context.WithValue(context.Background(), tenantKey{}, Tenant{"acme"})
	globex := context.WithValue(context.Background(), tenantKey{}, Tenant{"globex"})
	_, _ = h(acme, req)
	_, _ = h(acme, req)   // acme's retry: replayed
	_, _ = h(globex, req) // globex's own key "1": runs
	fmt.Println("handler runs:", runs)
	// Output: handler runs: 2
}

// A prefix names the key space. The default, the Lambda function name,
// changes when the function is renamed or deployed under a new stack; a
// literal prefix survives that, and refactoring the Go code, so a duplicate
// arriving across a deployment is still recognized.
func ExampleWithPrefix() {
	store := idempotent.NewMemoryStore()
	key := idempotent.WithKey(func(id string) (string, error) { return id, nil })

	engine := idempotent.New(store, idempotent.WithPrefix("charge-order"))
	before := idempotent.Wrap(engine, func(ctx context.Context, id string) (string, error) {
		return "charged " + id + " (v1)", nil
	}, key)
	// The next release: the handler is rewritten and the function renamed,
	// but the prefix is kept, so its records are still found.
	nextRelease := idempotent.New(store, idempotent.WithPrefix("charge-order"))
	after := idempotent.Wrap(nextRelease, func(ctx context.Context, id string) (string, error) {
		return "charged " + id + " (v2)", nil
	}, key)

	out, _ := before(context.Background(), "o-1")
	fmt.Println(out)
	out, _ = after(context.Background(), "o-1") // a retry that reached the new version
	fmt.Println(out)
	// Output:
	// charged o-1 (v1)
	// charged o-1 (v1)
}
