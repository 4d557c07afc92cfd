package sqsbatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

const (
	standardARN = "arn:aws:sqs:eu-west-1:000000000000:orders"
	fifoARN     = "arn:aws:sqs:eu-west-1:000000000000:orders.fifo"
)

// order is the message type of most tests. An OrderID containing "fail"
// makes the handler fail, one containing "panic" makes it panic.
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

func msg(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: standardARN, EventSource: "aws:sqs"}
}

// fifoMsg is a message of a FIFO queue, recognised by its ARN and its
// MessageGroupId attribute.
func fifoMsg(id, group, body string) events.SQSMessage {
	m := msg(id, body)
	m.EventSourceARN = fifoARN
	m.Attributes = map[string]string{"MessageGroupId": group, "MessageDeduplicationId": id}
	return m
}

func batch(msgs ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: msgs} }

func failedIDs(resp events.SQSEventResponse) []string {
	ids := make([]string, 0, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
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

var errThrottled = errors.New("ProvisionedThroughputExceededException")

// quiet is a logger that drops everything, for tests that do not look at logs.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newEngine is a test's Engine over store, configured by opts; its logs are
// discarded unless opts give idempotent.WithLogger.
func newEngine(store storage.Store, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithLogger(quiet()), idempotent.WithPrefix(testPrefix)}, opts...)...)
}

// testPrefix is newEngine's record prefix.
const testPrefix = "sqstest"

// logLines parses the JSON lines written by a slog.JSONHandler.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "log line %s", line)
		lines = append(lines, m)
	}
	return lines
}
