package apigateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/internal/benchbody"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// benchBody is a 1 KB JSON payment request, built as nethttp's
// BenchmarkMiddleware builds its own.
var benchBody = string(benchbody.Payment1K())

// benchHandlerV2 answers 201 with a small JSON body, as make bench's
// handler does, without its work: the door's cost is what is measured.
func benchHandlerV2(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated,
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    `{"paymentId":"pay_8e03978e40d5","status":"captured","amount":2500,"currency":"EUR"}`}, nil
}

// BenchmarkWrapV2 is WrapV2's cost in process, over the memory store, for
// the HTTP API event make bench sends (events/payments-new.json: eleven
// headers, a JWT authorizer) carrying a 1 KB JSON POST: bare is the
// handler alone, first-run a new key every time, replay the same key every
// time.
func BenchmarkWrapV2(b *testing.B) {
	raw, err := os.ReadFile("../../events/payments-new.json")
	if err != nil {
		b.Fatal(err)
	}
	var tmpl events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		b.Fatal(err)
	}
	tmpl.Body = benchBody
	tmpl.Headers["content-length"] = strconv.Itoa(len(benchBody))
	// The store is emptied every firstRunKeys iterations (outside the
	// timer), as in nethttp's BenchmarkMiddleware.
	const firstRunKeys = 1 << 12
	evs := make([]events.APIGatewayV2HTTPRequest, firstRunKeys)
	for i := range evs {
		evs[i] = tmpl
		evs[i].Headers = maps.Clone(tmpl.Headers)
		evs[i].Headers["idempotency-key"] = "8e03978e-40d5-43e8-bc93-" + strconv.Itoa(100000000000+i)
	}
	type handler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	wrap := func() handler {
		e := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
		return apigateway.WrapV2(e, benchHandlerV2)
	}
	run := func(b *testing.B, h func(i int) handler, ev func(i int) events.APIGatewayV2HTTPRequest, replayed string) {
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			out, err := h(i)(ctx, ev(i))
			if err != nil || out.StatusCode != http.StatusCreated || out.Headers[nethttp.HeaderReplayed] != replayed {
				b.Fatalf("status %d, replayed %q, error %v", out.StatusCode, out.Headers[nethttp.HeaderReplayed], err)
			}
		}
	}
	b.Run("bare", func(b *testing.B) {
		run(b, func(int) handler { return benchHandlerV2 }, func(i int) events.APIGatewayV2HTTPRequest { return evs[i%firstRunKeys] }, "")
	})
	b.Run("first-run", func(b *testing.B) {
		var h handler
		run(b, func(i int) handler {
			if i%firstRunKeys == 0 {
				b.StopTimer()
				h = wrap()
				b.StartTimer()
			}
			return h
		}, func(i int) events.APIGatewayV2HTTPRequest { return evs[i%firstRunKeys] }, "")
	})
	b.Run("replay", func(b *testing.B) {
		h := wrap()
		if out, err := h(context.Background(), evs[0]); err != nil || out.StatusCode != http.StatusCreated {
			b.Fatalf("first run: status %d, error %v", out.StatusCode, err)
		}
		run(b, func(int) handler { return h }, func(int) events.APIGatewayV2HTTPRequest { return evs[0] }, "true")
	})
}
