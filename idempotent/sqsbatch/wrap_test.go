package sqsbatch_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
// handler saw: what is this package's (decoding the body, the default key).
// The neighbour must never be affected. The engine's outcomes (handler
// errors and panics, key and payload functions, store answers) are tested
// once, in internal/batch (TestOutcomes).
func TestWrapOutcomes(t *testing.T) {
	t.Parallel()
	neighbour := msg("n", body("neighbour", 1))
	tests := []struct {
		name      string
		msg       events.SQSMessage
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
		{name: "empty message ID", msg: msg("", body("a", 1)), wantFail: true, wantCalls: []string{"neighbour"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), rec.handle)

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
	// By the record's id (the message id is the default key, under
	// newEngine's prefix): a batch claims its records in one wave, before
	// any message is in a context.
	recordID := idempotent.RecordID(testPrefix, "", id)
	return func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
		if rec.ID == recordID {
			return claim(ctx, rec, now)
		}
		return mem.Claim(ctx, rec, now)
	}
}

// TestWrapRedelivery runs two batches against one store: the second holds
// a redelivery or a duplicate of the first's message. It checks this
// package's defaults (the key is the message ID, the payload the decoded
// message) and that its options reach the engine; the engine's rules of
// keys and payloads are tested in internal/batch (TestRedelivery).
func TestWrapRedelivery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		first, second events.SQSMessage
		opts          []sqsbatch.Option
		wantFail      []string // of the second batch
		wantCalls     []string // over both batches
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
			opts:      []sqsbatch.Option{sqsbatch.WithKey(byOrderID)},
			wantCalls: []string{"a"},
		},
		{
			name:  "same order with an extra field the handler does not decode is replayed",
			first: msg("m1", body("a", 1)), second: msg("m2", `{"amount":1,"orderId":"a","traceId":"x"}`),
			opts:      []sqsbatch.Option{sqsbatch.WithKey(byOrderID)},
			wantCalls: []string{"a"},
		},
		{
			name:  "same order with another amount is a payload mismatch",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 2)),
			opts:     []sqsbatch.Option{sqsbatch.WithKey(byOrderID)},
			wantFail: []string{"m2"}, wantCalls: []string{"a"},
		},

		{
			name:  "WithRecordPayloadValidation compares the raw body",
			first: msg("m1", body("a", 1)), second: msg("m2", `{"amount":1,"orderId":"a"}`),
			opts: []sqsbatch.Option{sqsbatch.WithKey(byOrderID),
				sqsbatch.WithRecordPayloadValidation(func(m events.SQSMessage) (any, error) { return m.Body, nil })},
			wantFail: []string{"m2"}, wantCalls: []string{"a"},
		},
		{
			name:  "WithoutPayloadValidation replays whatever the body",
			first: msg("m1", body("a", 1)), second: msg("m2", body("a", 2)),
			opts:      []sqsbatch.Option{sqsbatch.WithKey(byOrderID), sqsbatch.WithoutPayloadValidation()},
			wantCalls: []string{"a"},
		},
		{
			name:  "WithRecordKey keys on an attribute",
			first: withAttr(msg("m1", body("a", 1)), "k1"), second: withAttr(msg("m2", body("a", 1)), "k1"),
			opts: []sqsbatch.Option{sqsbatch.WithRecordKey(func(m events.SQSMessage) (string, error) {
				return *m.MessageAttributes["idempotencyKey"].StringValue, nil
			})},
			wantCalls: []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := idempotent.NewMemoryStore()
			rec := newRecorder()
			_, err := sqsbatch.Wrap(newEngine(store), rec.handle, tt.opts...)(context.Background(), batch(tt.first))
			require.NoError(t, err)

			resp, err := sqsbatch.Wrap(newEngine(store), rec.handle, tt.opts...)(context.Background(), batch(tt.second))
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
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithRecordKey(nil))
		}, "sqsbatch: WithRecordKey: nil function"},
		{"nil payload function", func() {
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithPayloadValidation[order](nil))
		}, "sqsbatch: WithPayloadValidation: nil function"},
		{"nil payload function of the SQS message", func() {
			sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithRecordPayloadValidation(nil))
		}, "sqsbatch: WithRecordPayloadValidation: nil function"},
		// The options are plain values: a function of another type than the
		// handler's is found by Wrap, at start-up.
		{"key function of another type", func() {
			sqsbatch.Wrap(newEngine(store), func(context.Context, *order) error { return nil }, sqsbatch.WithKey(byOrderID))
		}, "sqsbatch: Wrap: the function given to WithKey takes sqsbatch_test.order, but the handler takes *sqsbatch_test.order"},
		{"payload function of the typed message given to WrapMessage", func() {
			sqsbatch.WrapMessage(newEngine(store), func(context.Context, events.SQSMessage) error { return nil },
				sqsbatch.WithPayloadValidation(func(o order) (any, error) { return o.OrderID, nil }))
		}, "sqsbatch: WrapMessage: the function given to WithPayloadValidation takes sqsbatch_test.order, but the handler takes events.SQSMessage"},
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
	h := sqsbatch.Wrap(newEngine(store, idempotent.WithLogger(logger)), handle, sqsbatch.WithParallelism(3),
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
	// Each message's lines in order; a message's outcome is logged when its
	// completion lands, which may come after the next message's lines.
	assert.Equal(t, map[string][]string{
		"m1": {"idempotent: executed"},
		"m2": {"sqsbatch: message cannot be processed", "idempotent: rejected"}, // the Engine hears of the rejection
	}, linesByMessage(lines))
}

// linesByMessage groups log lines' messages by their message_id, in order.
func linesByMessage(lines []map[string]any) map[string][]string {
	out := make(map[string][]string)
	for _, l := range lines {
		id, _ := l["message_id"].(string)
		out[id] = append(out[id], l["msg"].(string))
	}
	return out
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
