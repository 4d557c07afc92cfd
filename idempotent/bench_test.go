package idempotent_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idempotent"
)

// benchEvent is a Lambda-like event with a body of a given size.
type benchEvent struct {
	ID      string            `json:"id"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

type benchResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Amount int64  `json:"amount"`
}

func newBenchEvent(size int) benchEvent {
	return benchEvent{
		ID:      "evt",
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": "k"},
		Body:    strings.Repeat("x", size),
	}
}

func benchHandler(_ context.Context, e benchEvent) (benchResult, error) {
	return benchResult{ID: e.ID, Status: "captured", Amount: 1500}, nil
}

func eventKey(e benchEvent) (string, error) { return e.ID, nil }

func BenchmarkFirstRun(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			// Every iteration is a new key. The store is emptied every
			// firstRunKeys iterations (outside the timer): a DynamoDB table
			// does not slow down as it fills, and an ever-growing map would
			// make this measure map growth and GC rather than the wrapper.
			const firstRunKeys = 1 << 12
			evts := make([]benchEvent, firstRunKeys)
			for i := range evts {
				evts[i] = newBenchEvent(size)
				evts[i].ID = strconv.Itoa(i)
			}
			ctx := context.Background()
			var h func(context.Context, benchEvent) (benchResult, error)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%firstRunKeys == 0 {
					b.StopTimer()
					h = idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), benchHandler, idempotent.WithKey(eventKey))
					b.StartTimer()
				}
				if _, err := h(ctx, evts[i%firstRunKeys]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReplay(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			benchReplay(b, newBenchEvent(size), idempotent.WithKey(eventKey))
		})
	}
}

func BenchmarkReplayWholeEventKey(b *testing.B) {
	benchReplay(b, newBenchEvent(1<<10))
}

func BenchmarkReplayWithValidation(b *testing.B) {
	benchReplay(b, newBenchEvent(1<<10), idempotent.WithKey(eventKey),
		idempotent.WithPayloadValidation(func(e benchEvent) (any, error) { return e.Body, nil }))
}

// benchReplay wraps benchHandler with opts on a new memory store, runs it once
// for evt, and measures the replays of evt that follow (see benchLoop).
func benchReplay(b *testing.B, evt benchEvent, opts ...idempotent.WrapOption[benchEvent]) {
	b.Helper()
	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), benchHandler, opts...)
	if _, err := h(context.Background(), evt); err != nil {
		b.Fatal(err)
	}
	benchLoop(b, h, evt, nil)
}

func sizeName(n int) string { return strconv.Itoa(n>>10) + "KB" }
