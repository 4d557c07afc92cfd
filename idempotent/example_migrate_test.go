package idempotent_test

// The Powertools translation of docs/migrating-from-powertools.md, which
// quotes this example (internal/doccheck checks that the quote matches);
// `go test` runs it.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// Order is a command to place an order.
type Order struct {
	OrderID string `json:"orderId"`
	Amount  int64  `json:"amount"`
}

// Receipt is what placing an order returns.
type Receipt struct {
	OrderID  string `json:"orderId"`
	Replayed bool   `json:"-"`
}

// MarkReplayed sets Replayed on a replayed receipt (idempotent.ReplayMarker:
// response_hook / responseHook).
func (r *Receipt) MarkReplayed(idempotent.Replay) { r.Replayed = true }

// A Powertools configuration, option by option: the key and payload
// JMESPath expressions become typed functions, the rest keeps its meaning.
// One default differs: a missing key is an error unless WithOptionalKey.
func ExampleWrap_fromPowertools() {
	placeOrder := func(ctx context.Context, o Order) (Receipt, error) {
		return Receipt{OrderID: o.OrderID}, nil
	}
	engine := idempotent.New(idempotent.NewMemoryStore(),
		// raise_on_no_idempotency_key=False / throwOnNoIdempotencyKey: false (Powertools' default)
		idempotent.WithOptionalKey(),
		// expires_after_seconds=86400 / expiresAfterSeconds: 86400
		idempotent.WithExpiry(24*time.Hour),
		// use_local_cache=True, local_cache_max_items=256 / useLocalCache, maxLocalCacheSize
		idempotent.WithLocalCache(256),
		// key_prefix="place-order" / keyPrefix: 'place-order'
		idempotent.WithPrefix("place-order"),
	)
	handler := idempotent.Wrap(engine, placeOrder,
		// event_key_jmespath="orderId" / eventKeyJmesPath: 'orderId'
		idempotent.WithKey(func(o Order) (string, error) { return o.OrderID, nil }),
		// payload_validation_jmespath="amount" / payloadValidationJmesPath: 'amount'
		idempotent.WithPayloadValidation(func(o Order) (any, error) { return o.Amount, nil }),
	)

	first, _ := handler(context.Background(), Order{OrderID: "o-1", Amount: 100})
	again, _ := handler(context.Background(), Order{OrderID: "o-1", Amount: 100})
	_, err := handler(context.Background(), Order{OrderID: "o-1", Amount: 999})
	noKey, _ := handler(context.Background(), Order{Amount: 5}) // runs without idempotency
	fmt.Println(first.Replayed, again.Replayed, errors.Is(err, idempotent.ErrPayloadMismatch), noKey.OrderID == "")
	// Output: false true true true
}
