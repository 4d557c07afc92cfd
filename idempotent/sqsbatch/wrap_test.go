package sqsbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/testlog"
)

// TestWrapOutcomes runs a batch of one message under test and a neighbour,
// and checks which are reported as batch item failures and which orders the
// handler saw. The neighbour must never be affected.
func TestWrapOutcomes(t *testing.T) {
	t.Parallel()
	neighbour := msg("n", body("neighbour", 1))
	tests := []struct {
		name      string
		msg       events.SQSMessage
		fake      func(s *fakeStore)
		core      []idempotent.Option
		opts      []sqsbatch.Option[order]
		wantFail  bool
		wantCalls []string
	}{
		{name: "success", msg: msg("m", body("a", 1)), wantCalls: []string{"a", "neighbour"}},
		{name: "handler error", msg: msg("m", body("fail", 1)), wantFail: true, wantCalls: []string{"fail", "neighbour"}},
		{name: "handler panic", msg: msg("m", body("panic", 1)), wantFail: true, wantCalls: []string{"panic", "neighbour"}},
		{name: "not JSON", msg: msg("m", "charge order 7"), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "empty body", msg: msg("m", ""), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "JSON null", msg: msg("m", " null "), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "trailing data", msg: msg("m", body("a", 1)+"{}"), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "wrong field type", msg: msg("m", `{"orderId":"a","amount":"ten"}`), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "JSON string instead of an object", msg: msg("m", `"a"`), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "Validate fails", msg: msg("m", body("a", 0)), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "unknown fields are ignored", msg: msg("m", `{"orderId":"a","amount":1,"currency":"EUR"}`), wantCalls: []string{"a", "neighbour"}},
		{
			name: "key function fails", msg: msg("m", body("a", 1)),
			opts: []sqsbatch.Option[order]{sqsbatch.WithKey(func(o order) (string, error) {
				if o.OrderID == "a" {
					return "", errors.New("no key")
				}
				return o.OrderID, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "key function panics", msg: msg("m", body("a", 1)),
			opts: []sqsbatch.Option[order]{sqsbatch.WithKey(func(o order) (string, error) {
				if o.OrderID == "a" {
					panic("key bug")
				}
				return o.OrderID, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "payload function panics", msg: msg("m", body("a", 1)),
			opts: []sqsbatch.Option[order]{sqsbatch.WithPayloadValidation(func(o order) (any, error) {
				if o.OrderID == "a" {
					panic("payload bug")
				}
				return o, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "empty key", msg: msg("m", body("", 1)),
			opts:     []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID)},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "empty key with idempotent.WithOptionalKey runs without idempotency", msg: msg("m", body("", 1)),
			core:      []idempotent.Option{idempotent.WithOptionalKey()},
			opts:      []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID)},
			wantCalls: []string{"", "neighbour"},
		},
		{
			name: "key too long", msg: msg("m", body(strings.Repeat("k", 1024+1), 1)),
			opts:     []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID)},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{name: "empty message ID", msg: msg("", body("a", 1)), wantFail: true, wantCalls: []string{"neighbour"}},
		{
			name: "in progress elsewhere", msg: msg("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", refuseWith(func(*storage.Record) {}), s.mem)
			},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "store error on claim", msg: msg("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
					return storage.ClaimResult{}, errThrottled
				}, s.mem)
			},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "corrupt record", msg: msg("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", refuseWith(func(r *storage.Record) { r.Version = 99 }), s.mem)
			},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "completed without a stored response counts as done", msg: msg("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", refuseWith(func(r *storage.Record) {
					r.Status, r.Data = storage.StatusCompleted, []byte("n")
				}), s.mem)
			},
			wantCalls: []string{"neighbour"},
		},
		{
			name: "handler succeeded but completion failed", msg: msg("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.complete = func(context.Context, storage.Record) error { return errThrottled }
			},
			wantCalls: []string{"a", "neighbour"},
		},
		{
			name: "handler succeeded but the lease was lost", msg: msg("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.complete = func(context.Context, storage.Record) error { return storage.ErrLeaseLost }
			},
			wantCalls: []string{"a", "neighbour"},
		},
		{
			name: "handler failed and release failed", msg: msg("m", body("fail", 1)),
			fake: func(s *fakeStore) {
				s.release = func(context.Context, string, string) error { return errThrottled }
			},
			wantFail: true, wantCalls: []string{"fail", "neighbour"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &fakeStore{mem: idempotent.NewMemoryStore()}
			if tt.fake != nil {
				tt.fake(store)
			}
			rec := newRecorder()
			h := sqsbatch.Wrap(newEngine(store, tt.core...), rec.handle, tt.opts...)

			resp, err := h(context.Background(), batch(tt.msg, neighbour))
			require.NoError(t, err)
			var want []string
			if tt.wantFail {
				want = []string{tt.msg.MessageId}
			}
			assert.ElementsMatch(t, want, failedIDs(resp))
			assert.ElementsMatch(t, tt.wantCalls, rec.Calls())
		})
	}
}

// onlyFor applies claim to the record of message id (under the default key,
// the message ID) and lets the memory store answer the others.
func onlyFor(id string, claim func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error), mem storage.StepStore) func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
	return func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
		if m, ok := sqsbatch.MessageFromContext(ctx); ok && m.MessageId == id {
			return claim(ctx, rec, now)
		}
		return mem.Claim(ctx, rec, now)
	}
}

// TestWrapRedelivery runs two batches against one store: the second holds
// a redelivery or a duplicate of the first's message.
func TestWrapRedelivery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		first, second events.SQSMessage
		opts          []sqsbatch.Option[order]
		core          []idempotent.Option // the Engine of the second batch
		firstCore     []idempotent.Option // the Engine of the first batch, when not core
		wantFail      []string            // of the second batch
		wantCalls     []string            // over both batches
	}{
		{
			name:  "same message redelivered is replayed",
			first: msg("m1", body("a", 1)), second: msg("m1", body("a", 1)),
			wantCalls: []string{"a"},
		},
		{
			name:  "new message ID runs again under the default key",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 1)),
			wantCalls: []string{"a", "a"},
		},
		{
			name:  "new message ID, same order, is replayed under a key of the body",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 1)),
			opts:      []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID)},
			wantCalls: []string{"a"},
		},
		{
			name:  "same order with an extra field the handler does not decode is replayed",
			first: msg("m1", body("a", 1)), second: msg("m2", `{"amount":1,"orderId":"a","traceId":"x"}`),
			opts:      []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID)},
			wantCalls: []string{"a"},
		},
		{
			name:  "same order with another amount is a payload mismatch",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 2)),
			opts:     []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID)},
			wantFail: []string{"m2"}, wantCalls: []string{"a"},
		},
		{
			name:  "WithoutPayloadValidation replays whatever the body",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 2)),
			opts:      []sqsbatch.Option[order]{sqsbatch.WithKey(byOrderID), sqsbatch.WithoutPayloadValidation[order]()},
			wantCalls: []string{"a"},
		},
		{
			name:  "WithPayloadValidation narrows what must match",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 2)),
			opts: []sqsbatch.Option[order]{
				sqsbatch.WithKey(byOrderID),
				sqsbatch.WithPayloadValidation(func(o order) (any, error) { return o.OrderID, nil }),
			},
			wantCalls: []string{"a"},
		},
		{
			name:  "WithMessageKey keys on an attribute",
			first: withAttr(msg("m1", body("a", 1)), "k1"), second: withAttr(msg("m2", body("a", 1)), "k1"),
			opts: []sqsbatch.Option[order]{sqsbatch.WithMessageKey[order](func(m events.SQSMessage) (string, error) {
				return *m.MessageAttributes["idempotencyKey"].StringValue, nil
			})},
			wantCalls: []string{"a"},
		},
		{
			name:  "a failed message runs again",
			first: msg("m1", body("fail", 1)), second: msg("m1", body("fail", 1)),
			wantFail: []string{"m1"}, wantCalls: []string{"fail", "fail"},
		},
		{
			name:  "a panicked message runs again",
			first: msg("m1", body("panic", 1)), second: msg("m1", body("panic", 1)),
			wantFail: []string{"m1"}, wantCalls: []string{"panic", "panic"},
		},
		{
			name:  "another prefix is another namespace",
			first: msg("m1", body("a", 1)), second: msg("m1", body("a", 1)),
			firstCore: []idempotent.Option{idempotent.WithPrefix("first")},
			core:      []idempotent.Option{idempotent.WithPrefix("second")},
			wantCalls: []string{"a", "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := idempotent.NewMemoryStore()
			rec := newRecorder()
			firstCore := tt.core
			if tt.firstCore != nil {
				firstCore = tt.firstCore
			}
			_, err := sqsbatch.Wrap(newEngine(store, firstCore...), rec.handle, tt.opts...)(context.Background(), batch(tt.first))
			require.NoError(t, err)

			resp, err := sqsbatch.Wrap(newEngine(store, tt.core...), rec.handle, tt.opts...)(context.Background(), batch(tt.second))
			require.NoError(t, err)
			assert.Equal(t, nonNil(tt.wantFail), failedIDs(resp))
			assert.Equal(t, tt.wantCalls, rec.Calls())
		})
	}
}

func withAttr(m events.SQSMessage, key string) events.SQSMessage {
	m.MessageAttributes = map[string]events.SQSMessageAttribute{
		"idempotencyKey": {StringValue: &key, DataType: "String"},
	}
	return m
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func TestWrapMessage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	handle := func(_ context.Context, m events.SQSMessage) error {
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, m.Body)
		if m.Body == "fail" {
			return errors.New("no")
		}
		return nil
	}
	byAttr := sqsbatch.WithKey(func(m events.SQSMessage) (string, error) {
		return *m.MessageAttributes["idempotencyKey"].StringValue, nil
	})
	h := sqsbatch.WrapMessage(newEngine(idempotent.NewMemoryStore()), handle, byAttr)

	resp, err := h(context.Background(), batch(
		withAttr(msg("m1", "plain text"), "k1"),
		withAttr(msg("m2", "plain text"), "k1"), // duplicate: replayed
		withAttr(msg("m3", "other text"), "k1"), // same key, other body: payload mismatch
		withAttr(msg("m4", "fail"), "k2"),
	))
	require.NoError(t, err)
	assert.Equal(t, []string{"m3", "m4"}, failedIDs(resp))
	assert.Equal(t, []string{"plain text", "fail"}, bodies)
}

// TestInBatchDuplicates: messages of one batch with the same key run the
// handler once, one after another, so the later ones are replays.
func TestInBatchDuplicates(t *testing.T) {
	t.Parallel()
	for _, parallelism := range []int{1, 4} {
		for _, queue := range []string{"standard", "fifo"} {
			t.Run(fmt.Sprintf("%s/parallelism=%d", queue, parallelism), func(t *testing.T) {
				t.Parallel()
				mk := msg
				if queue == "fifo" {
					// Duplicates in different groups: they are only kept
					// apart by the key lock.
					mk = func(id, body string) events.SQSMessage { return fifoMsg(id, "g-"+id, body) }
				}
				rec := newRecorder()
				h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), rec.handle,
					sqsbatch.WithKey(byOrderID), sqsbatch.WithParallelism[order](parallelism))
				var msgs []events.SQSMessage
				for i, id := range []string{"a", "b", "a", "c", "a", "b", "a"} {
					msgs = append(msgs, mk(fmt.Sprintf("m%d", i), body(id, 1)))
				}
				msgs = append(msgs, mk("m9", body("a", 5))) // same key, another payload

				resp, err := h(context.Background(), batch(msgs...))
				require.NoError(t, err)
				assert.Equal(t, []string{"m9"}, failedIDs(resp))
				assert.ElementsMatch(t, []string{"a", "b", "c"}, rec.Calls())
				rec.requireNoOverlap(t)
			})
		}
	}
}

func TestDuplicateMessageIDReportedOnce(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), rec.handle)
	resp, err := h(context.Background(), batch(msg("m1", body("fail", 1)), msg("m1", body("fail", 1))))
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, failedIDs(resp))
}

func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), newRecorder().handle)
	resp, err := h(context.Background(), events.SQSEvent{})
	require.NoError(t, err)
	assert.NotNil(t, resp.BatchItemFailures, "an empty list, not null")
	assert.Empty(t, resp.BatchItemFailures)
}

func TestMessageFromContext(t *testing.T) {
	t.Parallel()
	_, ok := sqsbatch.MessageFromContext(context.Background())
	assert.False(t, ok)

	var mu sync.Mutex
	var inHandler, inHook []string
	handle := func(ctx context.Context, o order) error {
		m, ok := sqsbatch.MessageFromContext(ctx)
		require.True(t, ok)
		mu.Lock()
		defer mu.Unlock()
		inHandler = append(inHandler, m.MessageId)
		return nil
	}
	hook := func(ctx context.Context, ev idempotent.Event) {
		m, _ := sqsbatch.MessageFromContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		inHook = append(inHook, m.MessageId+":"+ev.Outcome.String())
	}
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(hook)), handle, sqsbatch.WithKey(byOrderID))
	_, err := h(context.Background(), batch(msg("m1", body("a", 1)), msg("m2", body("a", 1))))
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, inHandler)
	assert.Equal(t, []string{"m1:executed", "m2:replayed"}, inHook)
}

func TestWrapPanicsOnProgrammerErrors(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	handle := newRecorder().handle
	tests := []struct {
		name string
		wrap func()
		want string
	}{
		{"nil handler", func() { sqsbatch.Wrap[order](newEngine(store), nil) }, "sqsbatch: Wrap: nil handler"},
		{"nil message handler", func() { sqsbatch.WrapMessage(newEngine(store), nil) }, "sqsbatch: WrapMessage: nil handler"},
		{"nil Engine", func() { sqsbatch.Wrap(nil, handle) }, "sqsbatch: Wrap: nil Engine"},
		{"nil Engine of WrapMessage", func() {
			sqsbatch.WrapMessage(nil, func(context.Context, events.SQSMessage) error { return nil })
		}, "sqsbatch: WrapMessage: nil Engine"},
		{"nil key function", func() {
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithKey[order](nil))
		}, "sqsbatch: WithKey: nil function"},
		{"nil key function of the SQS message", func() {
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithMessageKey[order](nil))
		}, "sqsbatch: WithMessageKey: nil function"},
		{"nil payload function", func() {
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithPayloadValidation[order](nil))
		}, "sqsbatch: WithPayloadValidation: nil function"},
		{"nil payload function of the SQS message", func() {
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithMessagePayloadValidation[order](nil))
		}, "sqsbatch: WithMessagePayloadValidation: nil function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				r := recover()
				require.NotNil(t, r, "Wrap did not panic")
				assert.Contains(t, r, tt.want)
			}()
			tt.wrap()
		})
	}
}

// TestOptionsOfAnotherTypeDoNotCompile: an option whose function takes
// another message type than the handler's fails to compile, rather than
// panicking at start-up.
func TestOptionsOfAnotherTypeDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with the go command")
	}
	tests := []struct{ prog, want string }{
		{"key", "does not match"}, // Wrap infers two message types
		{"payload", "cannot use"}, // WrapMessage's type is fixed
	}
	for _, tt := range tests {
		t.Run(tt.prog, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command("go", "build", "-o", os.DevNull, "./testdata/mismatch/"+tt.prog).CombinedOutput()
			require.Error(t, err, "a mismatched %s function compiled", tt.prog)
			assert.Contains(t, string(out), tt.want, "it fails for the mismatch, not for anything else: %s", out)
			assert.Contains(t, string(out), "sqsbatch.Option[order]", "the option of the other type is named: %s", out)
		})
	}
}

// TestLogsNeverHoldBodiesOrKeys captures every record, at debug level, of
// batches whose bodies and keys hold secrets, along every failure path.
func TestLogsNeverHoldBodiesOrKeys(t *testing.T) {
	t.Parallel()
	const secretKey, secretBody = "key-7f3a9c", "body-51d2e8"
	type event struct {
		Account string         `json:"account"`
		Note    string         `json:"note"`
		At      time.Time      `json:"at"`
		Count   int8           `json:"count"`
		Tags    map[string]int `json:"tags"`
	}
	var buf testlog.Buffer
	logger := testlog.Logger(&buf)
	store := idempotent.NewMemoryStore()
	handle := func(_ context.Context, e event) error {
		if e.Note == "fail" {
			return errors.New("downstream failed")
		}
		return nil
	}
	h := sqsbatch.Wrap(newEngine(store, idempotent.WithLogger(logger)), handle, sqsbatch.WithParallelism[event](3),
		sqsbatch.WithKey(func(e event) (string, error) { return e.Account, nil }))
	ok := `{"account":"` + secretKey + `","note":"` + secretBody + `","at":"2025-01-02T03:04:05Z"}`
	msgs := []events.SQSMessage{
		msg("m-ok", ok),
		msg("m-dup", ok),
		msg("m-mismatch", `{"account":"`+secretKey+`","note":"`+secretBody+`2","at":"2025-01-02T03:04:05Z"}`),
		msg("m-fail", `{"account":"`+secretKey+`x","note":"fail","at":"2025-01-02T03:04:05Z"}`),
		msg("m-syntax", `{"account":"`+secretKey+`","note":"`+secretBody+`"`),
		msg("m-type", `{"account":"`+secretKey+`","note":["`+secretBody+`"]}`),
		msg("m-time", `{"account":"`+secretKey+`","at":"`+secretBody+`"}`),
		msg("m-text", secretBody),
		msg("m-overflow", `{"account":"`+secretKey+`","count":51282}`),
		msg("m-mapkey", `{"account":"`+secretKey+`","tags":{"`+secretBody+`":"x"}}`),
	}
	resp, err := h(context.Background(), batch(msgs...))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"m-mismatch", "m-fail", "m-syntax", "m-type", "m-time", "m-text", "m-overflow", "m-mapkey"}, failedIDs(resp))

	out := buf.String()
	assert.NotContains(t, out, secretKey)
	assert.NotContains(t, out, secretBody)
	assert.NotContains(t, out, "51282")
	lines := logLines(t, bytes.NewBufferString(out))
	require.NotEmpty(t, lines)
	logged := map[string]bool{}
	for _, l := range lines {
		id, ok := l["message_id"].(string)
		require.True(t, ok, "record without message_id: %v", l)
		logged[id] = true
	}
	for _, m := range msgs {
		assert.True(t, logged[m.MessageId], "no record for %s", m.MessageId)
	}
}

// pointerOrder validates through a pointer receiver.
type pointerOrder struct {
	OrderID string `json:"orderId"`
}

func (o *pointerOrder) Validate() error {
	if o.OrderID == "" {
		return errors.New("orderId is required")
	}
	return nil
}

func TestValidateWithPointerReceiver(t *testing.T) {
	t.Parallel()
	var calls []string
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), func(_ context.Context, o pointerOrder) error {
		calls = append(calls, o.OrderID)
		return nil
	})
	resp, err := h(context.Background(), batch(msg("m1", `{"orderId":"a"}`), msg("m2", `{}`)))
	require.NoError(t, err)
	assert.Equal(t, []string{"m2"}, failedIDs(resp))
	assert.Equal(t, []string{"a"}, calls)
}

// TestDefaultLogger runs an Engine without idempotent.WithLogger: records go
// to slog.Default, as it is when they are written, and still carry the
// message ID. Not parallel: it replaces the default logger.
func TestDefaultLogger(t *testing.T) {
	var buf testlog.Buffer
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	h := sqsbatch.Wrap(idempotent.New(idempotent.NewMemoryStore()), newRecorder().handle) // before SetDefault
	slog.SetDefault(testlog.Logger(&buf))

	_, err := h(context.Background(), batch(msg("m1", body("a", 1)), msg("m2", "not json")))
	require.NoError(t, err)
	lines := logLines(t, bytes.NewBufferString(buf.String()))
	require.Len(t, lines, 3)
	assert.Equal(t, "idempotent: executed", lines[0]["msg"])
	assert.Equal(t, "m1", lines[0]["message_id"])
	assert.Equal(t, "sqsbatch: message cannot be processed", lines[1]["msg"])
	assert.Equal(t, "m2", lines[1]["message_id"])
	assert.Equal(t, "idempotent: rejected", lines[2]["msg"], "the Engine hears of the rejection")
	assert.Equal(t, "m2", lines[2]["message_id"])
}

func TestOutcomeHookCountsEveryMessage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	byMsg := map[string]idempotent.Outcome{}
	var rejectedErr error
	hook := func(ctx context.Context, e idempotent.Event) {
		m, ok := sqsbatch.MessageFromContext(ctx)
		require.True(t, ok, "the hook's context carries the message")
		mu.Lock()
		defer mu.Unlock()
		byMsg[m.MessageId] = e.Outcome
		if e.Outcome == idempotent.OutcomeRejected {
			rejectedErr = e.Err
		}
	}
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(hook)), func(context.Context, struct {
		OrderID string `json:"orderId"`
	}) error {
		return nil
	})
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "good", Body: `{"orderId":"o-1"}`},
		{MessageId: "poison", Body: `{not json`},
	}}
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1)
	assert.Equal(t, "poison", resp.BatchItemFailures[0].ItemIdentifier)
	assert.Equal(t, map[string]idempotent.Outcome{"good": idempotent.OutcomeExecuted, "poison": idempotent.OutcomeRejected}, byMsg)
	assert.ErrorIs(t, rejectedErr, idempotent.ErrInvalidPayload)
}

// An outcome hook that panics, even when told of a message rejected before
// the core (an undecodable body), fails that message only: not its
// neighbours, not the batch, and not the process when lanes run in parallel.
func TestOutcomeHookPanicFailsOnlyItsMessage(t *testing.T) {
	for _, parallelism := range []int{1, 4} {
		t.Run(fmt.Sprintf("parallelism %d", parallelism), func(t *testing.T) {
			rec := newRecorder()
			e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
				if ev.Outcome == idempotent.OutcomeRejected {
					panic("hook bug")
				}
			}))
			h := sqsbatch.Wrap(e, rec.handle, sqsbatch.WithKey(byOrderID), sqsbatch.WithParallelism[order](parallelism))
			var resp events.SQSEventResponse
			var err error
			require.NotPanics(t, func() {
				resp, err = h(context.Background(), batch(msg("m1", body("o1", 5)), msg("m2", "not json"), msg("m3", body("o3", 1))))
			})
			require.NoError(t, err)
			assert.Equal(t, []string{"m2"}, failedIDs(resp))
			assert.ElementsMatch(t, []string{"o1", "o3"}, rec.Calls())
		})
	}
}

// A handler that panics with an error: the outcome hook can match it.
func TestHandlerPanicWithAnErrorIsMatchable(t *testing.T) {
	sentinel := errors.New("sentinel")
	var got error
	e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
		if ev.Outcome == idempotent.OutcomeHandlerError {
			got = ev.Err
		}
	}))
	h := sqsbatch.Wrap(e, func(context.Context, order) error { panic(sentinel) }, sqsbatch.WithKey(byOrderID))
	resp, err := h(context.Background(), batch(msg("m1", body("o1", 5))))
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, failedIDs(resp))
	require.Error(t, got)
	assert.ErrorIs(t, got, sentinel)
}

// A duplicate in the batch of a message whose handler succeeded but whose
// completion failed finds the record still in progress (under this
// invocation's own lease). It is done, not failed: its redelivery would take
// the record over after the lease and run the handler a second time.
func TestDuplicateAfterFailedCompletion(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo %v", fifo), func(t *testing.T) {
			rec := newRecorder()
			mem := idempotent.NewMemoryStore()
			var completes int
			store := &fakeStore{mem: mem, complete: func(ctx context.Context, r storage.Record) error {
				completes++
				if completes == 1 {
					return errThrottled
				}
				return mem.Complete(ctx, r)
			}}
			h := sqsbatch.Wrap(newEngine(store), rec.handle, sqsbatch.WithKey(byOrderID))
			// m4 reuses o1's key with another payload: still refused.
			ev := batch(msg("m1", body("o1", 5)), msg("m2", body("o1", 5)), msg("m3", body("o3", 1)), msg("m4", body("o1", 6)))
			if fifo {
				ev = batch(fifoMsg("m1", "g1", body("o1", 5)), fifoMsg("m2", "g2", body("o1", 5)),
					fifoMsg("m3", "g1", body("o3", 1)), fifoMsg("m4", "g3", body("o1", 6)))
			}
			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, []string{"m4"}, failedIDs(resp))
			assert.Equal(t, []string{"o1", "o3"}, rec.Calls(), "o1 ran once")
		})
	}
}

// A message that only replayed its key does not make a later in-batch
// duplicate "done" when that one finds the key in progress: the handler did
// not run in this batch, so the duplicate fails and is redelivered.
func TestReplayDoesNotMarkKeyDone(t *testing.T) {
	rec := newRecorder()
	mem := idempotent.NewMemoryStore()
	var claims int
	store := &fakeStore{mem: mem, claim: func(ctx context.Context, r storage.Record, now time.Time) (storage.ClaimResult, error) {
		claims++
		if m, _ := sqsbatch.MessageFromContext(ctx); m.MessageId == "m2" {
			// Another invocation holds the key now (the record expired and was
			// claimed again in between).
			return refuseWith(func(*storage.Record) {})(ctx, r, now)
		}
		return mem.Claim(ctx, r, now)
	}}
	h := sqsbatch.Wrap(newEngine(store), rec.handle, sqsbatch.WithKey(byOrderID))
	_, err := h(context.Background(), batch(msg("m0", body("o1", 5)))) // completes o1
	require.NoError(t, err)

	resp, err := h(context.Background(), batch(msg("m1", body("o1", 5)), msg("m2", body("o1", 5))))
	require.NoError(t, err)
	assert.Equal(t, []string{"m2"}, failedIDs(resp), "m1 replayed; m2 found o1 in progress elsewhere")
	assert.Equal(t, []string{"o1"}, rec.Calls())
}

// runtime.Goexit in a handler ends its lane's goroutine (with parallel
// lanes, one of ours): the message and the rest of its lane are reported
// failed, to be redelivered, never silently deleted; other lanes finish.
func TestGoexitInHandlerLosesNoMessage(t *testing.T) {
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), func(_ context.Context, o order) error {
		if o.OrderID == "exit" {
			runtime.Goexit()
		}
		return nil
	}, sqsbatch.WithKey(byOrderID), sqsbatch.WithParallelism[order](3))
	ev := batch(fifoMsg("m1", "g1", body("exit", 1)), fifoMsg("m2", "g1", body("after", 1)), fifoMsg("m3", "g2", body("ok", 1)))
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1", "m2"}, failedIDs(resp))
}

// A handler error is a failure whatever it wraps, even ErrResponseNotStored
// (from a nested idempotent call, say): the message is redelivered, not
// deleted as if its key were done.
func TestHandlerErrorWrappingResponseNotStoredFails(t *testing.T) {
	runs := 0
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), func(context.Context, order) error {
		runs++
		return fmt.Errorf("charge: %w", idempotent.ErrResponseNotStored)
	}, sqsbatch.WithKey(byOrderID))
	for range 2 {
		resp, err := h(context.Background(), batch(msg("m1", body("o1", 5))))
		require.NoError(t, err)
		assert.Equal(t, []string{"m1"}, failedIDs(resp))
	}
	assert.Equal(t, 2, runs, "released: the redelivery runs it again")
}
