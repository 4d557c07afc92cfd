package idempotent_test

// Benchmarks that take the in-process cost apart (make bench runs them with
// bench_test.go's; see BENCHMARKS.md). The wrapper is measured over stub
// stores that cost nothing, so its own work shows; the pieces (key derivation,
// payload fingerprint, response encoding and decoding) are measured as the
// differences between sub-benchmarks that differ in one option only, because
// they are unexported and reached only through Wrap.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// benchNullStore claims every key and accepts every completion, at no cost.
type benchNullStore struct{}

func (benchNullStore) Claim(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
	return storage.ClaimResult{Claimed: true}, nil
}
func (benchNullStore) Complete(context.Context, storage.Record) error                 { return nil }
func (benchNullStore) Release(context.Context, string, string) error                  { return nil }
func (benchNullStore) AppendStep(context.Context, string, string, storage.Step) error { return nil }
func (benchNullStore) Suspend(context.Context, string, string, time.Time) error       { return nil }

// benchRefusingStore refuses every claim with the same stored record, as a store
// does for a duplicate (replay when rec is completed, ErrInProgress when not).
type benchRefusingStore struct{ rec *storage.Record }

func (s benchRefusingStore) Claim(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
	return storage.ClaimResult{Existing: s.rec}, nil
}
func (benchRefusingStore) Complete(context.Context, storage.Record) error { return nil }
func (benchRefusingStore) Release(context.Context, string, string) error  { return nil }
func (benchRefusingStore) AppendStep(context.Context, string, string, storage.Step) error {
	return nil
}
func (benchRefusingStore) Suspend(context.Context, string, string, time.Time) error { return nil }

// benchCaptureStore is a MemoryStore that keeps the last completed record.
type benchCaptureStore struct {
	storage.StepStore
	last storage.Record
}

func (s *benchCaptureStore) Complete(ctx context.Context, rec storage.Record) error {
	s.last = rec
	return s.StepStore.Complete(ctx, rec)
}

var benchQuiet = idempotent.WithLogger(slog.New(slog.DiscardHandler))

// benchCompleted runs handler once through Wrap with opts and returns the
// record it completed: a real record for a benchRefusingStore to replay.
func benchCompleted[Out any](b *testing.B, handler func(context.Context, benchEvent) (Out, error), evt benchEvent, opts ...idempotent.WrapOption[benchEvent]) *storage.Record {
	b.Helper()
	s := &benchCaptureStore{StepStore: idempotent.NewMemoryStore()}
	if _, err := idempotent.Wrap(idempotent.New(s, benchQuiet), handler, opts...)(context.Background(), evt); err != nil {
		b.Fatal(err)
	}
	rec := s.last
	return &rec
}

func benchLoop[Out any](b *testing.B, h func(context.Context, benchEvent) (Out, error), evt benchEvent, want error) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h(ctx, evt); !errors.Is(err, want) {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrapperOnly is BenchmarkFirstRun/1KB and BenchmarkReplay/1KB
// without the memory store: the wrapper's own cost per invocation.
func BenchmarkWrapperOnly(b *testing.B) {
	evt := newBenchEvent(1 << 10)
	b.Run("FirstRun/1KB", func(b *testing.B) {
		benchLoop(b, idempotent.Wrap(idempotent.New(benchNullStore{}, benchQuiet), benchHandler, idempotent.WithKey(eventKey)), evt, nil)
	})
	b.Run("Replay/1KB", func(b *testing.B) {
		rec := benchCompleted(b, benchHandler, evt, idempotent.WithKey(eventKey))
		benchLoop(b, idempotent.Wrap(idempotent.New(benchRefusingStore{rec}, benchQuiet), benchHandler, idempotent.WithKey(eventKey)), evt, nil)
	})
}

// BenchmarkFirstRunSteadyState is BenchmarkFirstRun/1KB with a memory store
// that does not grow: 4096 keys in turn, the clock moved past their expiry
// after each round, so every invocation claims, runs and completes while the
// store's map keeps its size (BenchmarkFirstRun's map grows to b.N records).
func BenchmarkFirstRunSteadyState(b *testing.B) {
	const keys = 4096
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithClock(now), benchQuiet), benchHandler, idempotent.WithKey(eventKey))
	evts := make([]benchEvent, keys)
	for i := range evts {
		evts[i] = newBenchEvent(1 << 10)
		evts[i].ID = strconv.Itoa(i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == keys {
			i = 0
			offset.Add(int64(24 * time.Hour))
		}
		res, err := h(ctx, evts[i])
		if err != nil || res.ID != evts[i].ID {
			b.Fatal(res, err)
		}
		i++
	}
}

// BenchmarkKeyDerivation runs invocations that a store refuses as in
// progress: key, record ID, lease and claim record, nothing else. The
// sub-benchmarks differ only in how the key is derived.
func BenchmarkKeyDerivation(b *testing.B) {
	inProgress := &storage.Record{Status: storage.StatusInProgress, Version: storage.RecordVersion,
		ExpiresAt: time.Now().Add(time.Hour), LeaseExpiresAt: time.Now().Add(time.Minute)}
	store := benchRefusingStore{inProgress}
	scope := idempotent.WithScope(func(_ context.Context, e benchEvent) (string, error) { return e.Headers["idempotency-key"], nil })
	for _, c := range []struct {
		name string
		size int
		opts []idempotent.WrapOption[benchEvent]
	}{
		{"field", 1 << 10, []idempotent.WrapOption[benchEvent]{idempotent.WithKey(eventKey)}},
		{"field+scope", 1 << 10, []idempotent.WrapOption[benchEvent]{idempotent.WithKey(eventKey), scope}},
		{"whole-input/1KB", 1 << 10, nil},
		{"whole-input/64KB", 64 << 10, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchLoop(b, idempotent.Wrap(idempotent.New(store, benchQuiet), benchHandler, c.opts...), newBenchEvent(c.size), idempotent.ErrInProgress)
		})
	}
}

type benchPayload struct {
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
}

// BenchmarkFingerprint replays a 1 KB event from a stub store with payload
// validation of each kind; "none" is the baseline without validation.
func BenchmarkFingerprint(b *testing.B) {
	evt := newBenchEvent(1 << 10)
	rawBody, _ := json.Marshal(map[string]any{"body": evt.Body, "id": evt.ID, "headers": evt.Headers})
	for _, c := range []struct {
		name    string
		payload func(benchEvent) (any, error)
	}{
		{"none", nil},
		{"string/1KB", func(e benchEvent) (any, error) { return e.Body, nil }},
		{"bytes/1KB", func(e benchEvent) (any, error) { return []byte(e.Body), nil }},
		{"json.RawMessage/1KB", func(benchEvent) (any, error) { return json.RawMessage(rawBody), nil }},
		{"struct/1KB", func(e benchEvent) (any, error) { return benchPayload{Body: e.Body, Headers: e.Headers}, nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := []idempotent.WrapOption[benchEvent]{idempotent.WithKey(eventKey)}
			if c.payload != nil {
				opts = append(opts, idempotent.WithPayloadValidation(c.payload))
			}
			rec := benchCompleted(b, benchHandler, evt, opts...)
			benchLoop(b, idempotent.Wrap(idempotent.New(benchRefusingStore{rec}, benchQuiet), benchHandler, opts...), evt, nil)
		})
	}
}

// benchSized is a response of a chosen size, of text that compresses about
// as well as JSON does.
type benchSized struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

func benchSizedHandler(size int) func(context.Context, benchEvent) (benchSized, error) {
	r := rand.New(rand.NewPCG(1, uint64(size)))
	words := []string{"payment", "captured", "order", "amount", "currency", "EUR", "customer", "id", "status", "1500"}
	text := make([]byte, 0, size)
	for len(text) < size {
		text = append(text, words[r.IntN(len(words))]...)
		text = append(text, ' ')
	}
	res := benchSized{Text: string(text[:size])}
	return func(_ context.Context, e benchEvent) (benchSized, error) {
		res.ID = e.ID
		return res, nil
	}
}

var benchResponseSizes = []struct {
	name string
	size int
}{{"100B", 100}, {"3KB", 3 << 10}, {"16KB-deflate", 16 << 10}}

// BenchmarkResponseEncode runs first invocations over a store that costs
// nothing, with responses of several sizes; above 4 KB (the default
// WithCompressAbove) the stored data is DEFLATE-compressed.
func BenchmarkResponseEncode(b *testing.B) {
	evt := newBenchEvent(1 << 10)
	for _, c := range benchResponseSizes {
		b.Run(c.name, func(b *testing.B) {
			benchLoop(b, idempotent.Wrap(idempotent.New(benchNullStore{}, benchQuiet), benchSizedHandler(c.size), idempotent.WithKey(eventKey)), evt, nil)
		})
	}
}

// BenchmarkResponseDecode replays records holding responses of several sizes
// from a store that costs nothing.
func BenchmarkResponseDecode(b *testing.B) {
	evt := newBenchEvent(1 << 10)
	for _, c := range benchResponseSizes {
		b.Run(c.name, func(b *testing.B) {
			h := benchSizedHandler(c.size)
			rec := benchCompleted(b, h, evt, idempotent.WithKey(eventKey))
			benchLoop(b, idempotent.Wrap(idempotent.New(benchRefusingStore{rec}, benchQuiet), h, idempotent.WithKey(eventKey)), evt, nil)
		})
	}
}
