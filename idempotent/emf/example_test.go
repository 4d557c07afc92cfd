package emf_test

import (
	"context"
	"os"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/emf"
)

func ExampleNew() {
	metrics := emf.New(os.Stdout, func(o *emf.Options) {
		o.Namespace = "payments"
		o.Dimensions = map[string]string{"FunctionName": "payments"}
		o.Now = func() time.Time { return time.UnixMilli(1_800_000_000_000) }
	})
	engine := idempotent.New(idempotent.NewMemoryStore(),
		idempotent.WithClock(func() time.Time { return time.UnixMilli(1_800_000_000_000) }),
		idempotent.WithOutcomeHook(metrics.Hook))
	handler := idempotent.Wrap(engine,
		func(ctx context.Context, id string) (string, error) { return id, nil },
		idempotent.WithKey(func(id string) (string, error) { return id, nil }))
	_, _ = handler(context.Background(), "order-1")
	// Output:
	// {"FunctionName":"payments","_aws":{"Timestamp":1800000000000,"CloudWatchMetrics":[{"Namespace":"payments","Dimensions":[["FunctionName"]],"Metrics":[{"Name":"executed","Unit":"Count"},{"Name":"duration_ms","Unit":"Milliseconds"}]}]},"duration_ms":0,"executed":1}
}
