package otelidem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/otelidem"
)

// A call and its duplicate: the duplicate's span is a replay that links to
// the span of the run that stored the response, through the record.
func ExampleInstrument() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)) // in production: a batching OTLP exporter
	defer func() { _ = tp.Shutdown(context.Background()) }()

	engine := idempotent.New(idempotent.NewMemoryStore(), // dynamostore.New(...) in production
		idempotent.WithLogger(slog.New(slog.DiscardHandler)),
		otelidem.Instrument(otelidem.WithTracerProvider(tp)))
	pay := idempotent.Wrap(engine, func(ctx context.Context, cents int) (string, error) {
		return fmt.Sprintf("paid %d", cents), nil
	}, idempotent.WithKey(func(int) (string, error) { return "order-42", nil }))

	for range 2 {
		if _, err := pay(context.Background(), 500); err != nil {
			fmt.Println(err)
		}
	}
	got := spans.GetSpans()
	for _, s := range got {
		outcome, calls := "", int64(0)
		for _, kv := range s.Attributes {
			switch kv.Key {
			case otelidem.AttrOutcome:
				outcome = kv.Value.AsString()
			case otelidem.AttrStoreCalls:
				calls = kv.Value.AsInt64()
			}
		}
		fmt.Printf("%s: %s, %d store calls, events %d\n", s.Name, outcome, calls, len(s.Events))
	}
	fmt.Println("replay links to the original:", got[1].Links[0].SpanContext.SpanID() == got[0].SpanContext.SpanID())
	// Output:
	// idemkit.call: executed, 2 store calls, events 3
	// idemkit.call: replayed, 1 store calls, events 1
	// replay links to the original: true
}

// Receipt is the answer of the Lambda example's handler.
type Receipt struct {
	OrderID string `json:"orderId"`
}

// Order is the input of the Lambda example's handler.
type Order struct {
	OrderID string `json:"orderId"`
	Cents   int    `json:"cents"`
}

// On Lambda, without otellambda: a span per invocation, the idempotent
// call's span inside it, and the TracerProvider flushed before the handler
// returns, since Lambda may freeze the process right after.
func Example_lambda() {
	exporter := tracetest.NewInMemoryExporter() // otlptracehttp.New(ctx) or another exporter in production
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	store := idempotent.NewMemoryStore() // dynamostore.New(dynamodb.NewFromConfig(cfg), table) in production
	engine := idempotent.New(store, otelidem.Instrument(otelidem.WithTracerProvider(tp)))
	charge := idempotent.Wrap(engine, func(ctx context.Context, o Order) (Receipt, error) {
		return Receipt{OrderID: o.OrderID}, nil // the work: its own spans are children of the call's
	}, idempotent.WithKey(func(o Order) (string, error) { return o.OrderID, nil }))

	handler := func(ctx context.Context, o Order) (Receipt, error) {
		ctx, span := tp.Tracer("payments").Start(ctx, "payments invoke", trace.WithSpanKind(trace.SpanKindServer))
		out, err := charge(ctx, o)
		span.End()
		// Export before returning: Lambda may freeze the process once the
		// handler returns, and a batcher's spans would wait in memory.
		_ = tp.ForceFlush(ctx)
		return out, err
	}
	lambda.Start(handler)
}

// On a net/http server: behind otelhttp.NewHandler the call's span is the
// request span's child; without it, Extract continues the caller's
// traceparent.
func ExampleExtract() {
	store := idempotent.NewMemoryStore()
	engine := idempotent.New(store, otelidem.Instrument()) // the global TracerProvider and MeterProvider
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"paid":true}`)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /pay", otelidem.Extract(nethttp.Middleware(engine)(pay)))
	// or: mux.Handle("POST /pay", otelhttp.NewHandler(nethttp.Middleware(engine)(pay), "pay"))
	_ = http.ListenAndServe("127.0.0.1:8080", mux)
}
