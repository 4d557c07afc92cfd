package nethttp_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/benchbody"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// benchBody is a 1 KB JSON payment request, the size of the other
// benchmarks' event (bench/testdata/payment-event.json).
var benchBody = benchbody.Payment1K()

// benchResponse is the handler's answer: 201 with a small JSON body.
var benchResponse = []byte(`{"paymentId":"pay_8e03978e40d5","status":"captured","amount":2500,"currency":"EUR"}`)

// benchHandler reads the request body and answers benchResponse: the bare
// handler every sub-benchmark runs.
var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(benchResponse)
})

// benchWriter is a ResponseWriter that keeps nothing, its header map reused.
// Like net/http's own writer, it is an io.StringWriter.
type benchWriter struct {
	h      http.Header
	status int
}

func (w *benchWriter) Header() http.Header               { return w.h }
func (w *benchWriter) WriteHeader(code int)              { w.status = code }
func (w *benchWriter) Write(p []byte) (int, error)       { return len(p), nil }
func (w *benchWriter) WriteString(s string) (int, error) { return len(s), nil }

func (w *benchWriter) reset() { clear(w.h); w.status = 0 }

// BenchmarkMiddleware is the middleware's cost in process, over the memory
// store, for a 1 KB JSON POST: bare is the handler alone, first-run a new
// key every time (the record claimed, the response captured and stored),
// replay the same key every time (the stored response written back). Every
// sub-benchmark builds its request the same way, so the middleware's added
// cost is first-run (or replay) minus bare; make bench (bench/httpmw.go)
// reports that difference.
func BenchmarkMiddleware(b *testing.B) {
	// The store is emptied every firstRunKeys iterations (outside the timer):
	// an ever-growing map would measure map growth and GC, not the middleware.
	const firstRunKeys = 1 << 12
	keys := make([]string, firstRunKeys)
	for i := range keys {
		keys[i] = "8e03978e-40d5-43e8-bc93-" + strconv.Itoa(100000000000+i)
	}
	newMiddleware := func() http.Handler {
		return nethttp.Middleware(idempotent.New(idempotent.NewMemoryStore(),
			idempotent.WithLogger(slog.New(slog.DiscardHandler))))(benchHandler)
	}
	// run serves b.N requests through h, the i-th with key(i).
	run := func(b *testing.B, ctype string, h func(i int) http.Handler, key func(i int) string, want int) *benchWriter {
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/payments", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		req.ContentLength = int64(len(benchBody))
		body := bytes.NewReader(benchBody)
		w := &benchWriter{h: http.Header{}}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			handler := h(i)
			body.Reset(benchBody)
			req.Body = io.NopCloser(body)
			req.Header[nethttp.HeaderIdempotencyKey] = []string{key(i)}
			w.reset()
			handler.ServeHTTP(w, req)
			if w.status != want {
				b.Fatalf("status %d, want %d", w.status, want)
			}
		}
		return w
	}
	b.Run("bare", func(b *testing.B) {
		run(b, "application/json", func(int) http.Handler { return benchHandler }, func(i int) string { return keys[i%firstRunKeys] }, http.StatusCreated)
	})
	// JSON bodies are fingerprinted canonically; "raw" sends the same bytes
	// as application/octet-stream, fingerprinted as they are, which tells
	// the canonicalization's share of the cost.
	for _, ct := range []struct{ name, ctype string }{{"", "application/json"}, {"-raw", "application/octet-stream"}} {
		b.Run("first-run"+ct.name, func(b *testing.B) {
			var h http.Handler
			w := run(b, ct.ctype, func(i int) http.Handler {
				if i%firstRunKeys == 0 {
					b.StopTimer()
					h = newMiddleware()
					b.StartTimer()
				}
				return h
			}, func(i int) string { return keys[i%firstRunKeys] }, http.StatusCreated)
			if w.h.Get(nethttp.HeaderReplayed) != "" {
				b.Fatal("a first run was replayed")
			}
		})
		b.Run("replay"+ct.name, func(b *testing.B) {
			h := newMiddleware()
			key := keys[0]
			w := &benchWriter{h: http.Header{}}
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/payments", bytes.NewReader(benchBody))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", ct.ctype)
			req.Header.Set(nethttp.HeaderIdempotencyKey, key)
			h.ServeHTTP(w, req) // the first run, stored
			if w.status != http.StatusCreated {
				b.Fatalf("first run: status %d", w.status)
			}
			w = run(b, ct.ctype, func(int) http.Handler { return h }, func(int) string { return key }, http.StatusCreated)
			if w.h.Get(nethttp.HeaderReplayed) != "true" {
				b.Fatal("not replayed")
			}
		})
	}
}
