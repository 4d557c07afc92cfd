package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// msg is a record of the fake source the engine's rules are tested on: a
// queue in the shape of SQS. Its default key is ID, its body is decoded as
// JSON, and a batch whose records have a Group is ordered: a lane per group,
// stopped by its first failure (unless WithContinueOnFailure); otherwise a
// lane per key, never stopped.
type msg struct {
	ID, Group, Body string
}

func one(id, body string) msg            { return msg{ID: id, Body: body} }
func grouped(id, group, body string) msg { return msg{ID: id, Group: group, Body: body} }

type option = func(*batch.Settings[msg])

var (
	errInvalidBody   = errors.New("fake: invalid body")
	errInvalidRecord = errors.New("fake: invalid record")
)

type recordKey struct{}

// recordFrom returns the record in ctx (the handler's and the hooks').
func recordFrom(ctx context.Context) (msg, bool) {
	if m, ok := ctx.Value(recordKey{}).(*msg); ok {
		return *m, true
	}
	return msg{}, false
}

// source is the fake source for handler type T.
func source[T any](handle func(context.Context, T) error) batch.Source[msg, T] {
	return batch.Source[msg, T]{
		Name: "fake", Noun: "record", Handle: handle,
		Decode: func(m *msg) (T, error) {
			return batch.DecodeJSON[T]([]byte(m.Body), errInvalidBody, errInvalidRecord)
		},
		Key:     func(m *msg, _ T) (string, error) { return m.ID, nil },
		Payload: func(_ *msg, v T) (any, error) { return v, nil },
		Attrs:   func(m *msg) []slog.Attr { return []slog.Attr{slog.String("id", m.ID)} },
		Context: func(ctx context.Context, m *msg) context.Context { return context.WithValue(ctx, recordKey{}, m) },
	}
}

// wrap is the fake source's Wrap: its handler returns the IDs of the
// records not done, in batch order, each once (the partial batch response).
func wrap[T any](e *idempotent.Engine, handle func(context.Context, T) error, opts ...option) func(context.Context, []msg) []string {
	s := batch.Apply(opts)
	p := batch.New(e, "Wrap", source(handle), s)
	return func(ctx context.Context, msgs []msg) []string {
		order := batch.Order{Lane: func(_ int, key string) string {
			if key == "" {
				return ""
			}
			return "key:" + key
		}}
		if slices.ContainsFunc(msgs, func(m msg) bool { return m.Group != "" }) {
			order = batch.Order{Lane: func(i int, _ string) string { return "group:" + msgs[i].Group },
				Stop: !s.Continue(), LaneNoun: "group"}
		}
		out := []string{}
		for _, i := range batch.NotDone(p.Run(ctx, msgs, order)) {
			if !slices.Contains(out, msgs[i].ID) {
				out = append(out, msgs[i].ID)
			}
		}
		return out
	}
}

// order is the value type of most tests. An OrderID containing "fail"
// makes the recorder's handler fail, one containing "panic" makes it panic.
type order struct {
	OrderID string `json:"orderId"`
	Amount  int    `json:"amount"`
}

func (o order) Validate() error {
	if o.Amount <= 0 {
		return errors.New("amount must be positive")
	}
	return nil
}

func byOrderID(o order) (string, error) { return o.OrderID, nil }

func body(id string, amount int) string {
	return fmt.Sprintf(`{"orderId":%q,"amount":%d}`, id, amount)
}

// recorder is a handler that records the orders it is called with, in order,
// and tracks how many calls for one key run at the same time.
type recorder struct {
	mu        sync.Mutex
	calls     []string
	active    map[string]int
	maxActive map[string]int
}

func newRecorder() *recorder {
	return &recorder{active: map[string]int{}, maxActive: map[string]int{}}
}

func (r *recorder) handle(_ context.Context, o order) error {
	r.mu.Lock()
	r.calls = append(r.calls, o.OrderID)
	r.active[o.OrderID]++
	r.maxActive[o.OrderID] = max(r.maxActive[o.OrderID], r.active[o.OrderID])
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.active[o.OrderID]--
		r.mu.Unlock()
	}()
	switch {
	case strings.Contains(o.OrderID, "fail"):
		return errors.New("downstream rejected the order")
	case strings.Contains(o.OrderID, "panic"):
		panic("handler bug")
	}
	return nil
}

func (r *recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) requireNoOverlap(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, n := range r.maxActive {
		require.LessOrEqual(t, n, 1, "calls for key %q overlapped", key)
	}
}

// fakeStore is a MemoryStore whose calls can be replaced to inject faults.
type fakeStore struct {
	mem      storage.StepStore
	claim    func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error)
	complete func(ctx context.Context, rec storage.Record) error
	release  func(ctx context.Context, id, lease string) error
}

var _ storage.Store = (*fakeStore)(nil)

func (s *fakeStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if s.claim != nil {
		return s.claim(ctx, rec, now)
	}
	return s.mem.Claim(ctx, rec, now)
}

func (s *fakeStore) Complete(ctx context.Context, rec storage.Record) error {
	if s.complete != nil {
		return s.complete(ctx, rec)
	}
	return s.mem.Complete(ctx, rec)
}

func (s *fakeStore) Release(ctx context.Context, id, lease string) error {
	if s.release != nil {
		return s.release(ctx, id, lease)
	}
	return s.mem.Release(ctx, id, lease)
}

func (s *fakeStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	return s.mem.AppendStep(ctx, id, lease, step)
}

func (s *fakeStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	return s.mem.Suspend(ctx, id, lease, leaseEnd)
}

// refuseWith makes a claim find a live record: the claimed one with another
// lease, changed by edit.
func refuseWith(edit func(*storage.Record)) func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
	return func(_ context.Context, rec storage.Record, _ time.Time) (storage.ClaimResult, error) {
		ex := rec
		ex.Lease = "someone-else"
		edit(&ex)
		return storage.ClaimResult{Existing: &ex}, nil
	}
}

// onlyFor applies claim to the record of the message key id (the fake
// source's default key, under newEngine's prefix) and lets the memory store
// answer the others. It goes by the record's id, not by the message in the
// context: a batch claims its records in one wave, before any runs.
func onlyFor(id string, claim func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error), mem storage.StepStore) func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
	recordID := idempotent.RecordID(testPrefix, "", id)
	return func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
		if rec.ID == recordID {
			return claim(ctx, rec, now)
		}
		return mem.Claim(ctx, rec, now)
	}
}

var errThrottled = errors.New("ProvisionedThroughputExceededException")

// newEngine is a test's Engine over store, configured by opts; its logs are
// discarded unless opts give idempotent.WithLogger.
func newEngine(store storage.Store, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithLogger(slog.New(slog.DiscardHandler)), idempotent.WithPrefix(testPrefix)}, opts...)...)
}

// testPrefix is newEngine's record prefix.
const testPrefix = "batchtest"
