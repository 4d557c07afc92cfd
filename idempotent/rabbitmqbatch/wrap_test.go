package rabbitmqbatch_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/rabbitmqbatch"
	"github.com/idemkit/idemkit/internal/batchtest"
)

type payment struct {
	PaymentID  string `json:"paymentId"`
	CustomerID string `json:"customerId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

const queue = "payments::/"

// sample is events/rabbitmq.json: queue payments::/ holds msg-3001
// (pay_3001), msg-3002 (pay_3002) and msg-3003 (pay_3003).
func sample(t *testing.T) events.RabbitMQEvent {
	return batchtest.ReadEvent[events.RabbitMQEvent](t, "../../events/rabbitmq.json")
}

func handler(rec *batchtest.Recorder) func(context.Context, payment) error {
	return func(_ context.Context, p payment) error { return rec.Call(p.PaymentID) }
}

func newHandler(t *testing.T, rec *batchtest.Recorder, opts ...rabbitmqbatch.Option) func(context.Context, events.RabbitMQEvent) error {
	t.Helper()
	return rabbitmqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(rec), opts...)
}

func ptr(s string) *string { return &s }

func message(id *string, paymentID string) events.RabbitMQMessage {
	return events.RabbitMQMessage{
		BasicProperties: events.RabbitMQBasicProperties{MessageID: id, ContentType: "application/json"},
		Data:            base64.StdEncoding.EncodeToString([]byte(`{"paymentId":"` + paymentID + `","amount":100}`)),
	}
}

// notDone returns the message IDs of err, a *rabbitmqbatch.BatchError.
func notDone(t *testing.T, err error) []string {
	t.Helper()
	var berr *rabbitmqbatch.BatchError
	require.ErrorAs(t, err, &berr)
	assert.ErrorIs(t, err, rabbitmqbatch.ErrNotDone)
	return berr.MessageIDs
}

// TestFailureRedelivered: a failure in the middle of the batch stops the
// queue and fails the invocation; the whole batch, delivered again, replays
// what was done and runs the rest, so each handler runs once in the end.
func TestFailureRedelivered(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			var rec batchtest.Recorder
			h := rabbitmqbatch.Wrap(batchtest.Engine(s.Make(t), batchtest.NewClock()), handler(&rec))
			rec.Fail("pay_3002")
			err := h(context.Background(), ev)
			assert.Equal(t, []string{"msg-3002", "msg-3003"}, notDone(t, err), "the failed message and the one after it")
			assert.NotErrorIs(t, err, rabbitmqbatch.ErrNoMessageID)
			assert.Contains(t, err.Error(), `"msg-3002", "msg-3003"`)
			assert.Equal(t, []string{"pay_3001", "pay_3002"}, rec.Calls(), "pay_3003 is not run after a failure in its queue")

			rec.Fail()
			ev.MessagesByQueue[queue][0].Redelivered = true // a hint only: not part of the key
			require.NoError(t, h(context.Background(), ev))
			assert.Equal(t, []string{"pay_3002", "pay_3003"}, rec.Calls(), "pay_3001 is replayed from its record")

			require.NoError(t, h(context.Background(), ev))
			assert.Empty(t, rec.Calls(), "every message is done: a third delivery runs nothing")
		})
	}
}

// TestNoMessageID: under the default key a message without a message ID
// fails with ErrNoMessageID and stops its queue; with a key option it runs.
func TestNoMessageID(t *testing.T) {
	t.Parallel()
	for _, id := range []*string{nil, ptr("")} {
		ev := sample(t)
		ev.MessagesByQueue[queue][1].BasicProperties.MessageID = id
		var rec batchtest.Recorder
		err := newHandler(t, &rec)(context.Background(), ev)
		assert.Equal(t, []string{"", "msg-3003"}, notDone(t, err))
		assert.ErrorIs(t, err, rabbitmqbatch.ErrNoMessageID)
		assert.ErrorIs(t, err, idempotent.ErrMissingKey)
		assert.Contains(t, err.Error(), "WithKey or WithRecordKey")
		assert.Equal(t, []string{"pay_3001"}, rec.Calls())

		byPayment := rabbitmqbatch.WithKey(func(p payment) (string, error) { return p.PaymentID, nil })
		require.NoError(t, newHandler(t, &rec, byPayment)(context.Background(), ev))
		assert.Equal(t, []string{"pay_3001", "pay_3002", "pay_3003"}, rec.Calls())

		rec.Fail("pay_3002")
		err = newHandler(t, &rec, byPayment)(context.Background(), ev)
		assert.Equal(t, []string{"", "msg-3003"}, notDone(t, err))
		assert.NotErrorIs(t, err, rabbitmqbatch.ErrNoMessageID, "under WithKey the message failed in its handler")
		assert.Equal(t, []string{"pay_3001", "pay_3002"}, rec.Calls())
	}
}

// TestUndecodable: data that is not base64, not JSON or JSON null fails its
// message without calling the handler, and stops its queue.
func TestUndecodable(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		"not base64!",
		base64.StdEncoding.EncodeToString([]byte(`{"paymentId":`)),
		base64.StdEncoding.EncodeToString([]byte(`null`)),
		base64.StdEncoding.EncodeToString([]byte(`{"amount":"12"}`)),
	} {
		ev := sample(t)
		ev.MessagesByQueue[queue][1].Data = data
		var rec batchtest.Recorder
		err := newHandler(t, &rec)(context.Background(), ev)
		assert.Equal(t, []string{"msg-3002", "msg-3003"}, notDone(t, err), "data %q", data)
		assert.Equal(t, []string{"pay_3001"}, rec.Calls())
	}
}

// TestSameMessageTwice: a message twice in one batch runs once.
func TestSameMessageTwice(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.MessagesByQueue[queue] = append(ev.MessagesByQueue[queue], ev.MessagesByQueue[queue][0])
	var rec batchtest.Recorder
	require.NoError(t, newHandler(t, &rec)(context.Background(), ev))
	assert.Equal(t, []string{"pay_3001", "pay_3002", "pay_3003"}, rec.Calls())
}

// TestOrderPerQueue: queues run in the order of their names, the messages
// of each in order; a failure stops its own queue only.
func TestOrderPerQueue(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.MessagesByQueue["alerts::/"] = []events.RabbitMQMessage{message(ptr("a-1"), "pay_5001"), message(ptr("a-2"), "pay_5002")}
	ev.MessagesByQueue["zeta::/"] = []events.RabbitMQMessage{message(ptr("z-1"), "pay_6001")}
	var rec batchtest.Recorder
	h := newHandler(t, &rec, rabbitmqbatch.WithParallelism(1)) // the queues in turn: one order to assert
	rec.Fail("pay_5001")
	err := h(context.Background(), ev)
	assert.Equal(t, []string{"a-1", "a-2"}, notDone(t, err))
	assert.Equal(t, []string{"pay_5001", "pay_3001", "pay_3002", "pay_3003", "pay_6001"}, rec.Calls())

	rec.Fail()
	require.NoError(t, h(context.Background(), ev))
	assert.Equal(t, []string{"pay_5001", "pay_5002"}, rec.Calls())
}

// TestQueuesSideBySide: by default the queues of a batch run at once, each
// in its order: queue a's first message waits for queue b's to start.
func TestQueuesSideBySide(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var mu sync.Mutex
	var calls []string
	h := rabbitmqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), func(_ context.Context, p payment) error {
		mu.Lock()
		calls = append(calls, p.PaymentID)
		mu.Unlock()
		switch p.PaymentID {
		case "a1":
			select {
			case <-started:
			case <-time.After(5 * time.Second):
				return errors.New("queue b never ran beside queue a")
			}
		case "b1":
			close(started)
		}
		return nil
	})
	ev := events.RabbitMQEvent{MessagesByQueue: map[string][]events.RabbitMQMessage{
		"a::/": {message(ptr("m-a1"), "a1"), message(ptr("m-a2"), "a2")},
		"b::/": {message(ptr("m-b1"), "b1"), message(ptr("m-b2"), "b2")},
	}}
	require.NoError(t, h(context.Background(), ev))
	assert.ElementsMatch(t, []string{"a1", "a2", "b1", "b2"}, calls)
	assert.Less(t, slices.Index(calls, "a1"), slices.Index(calls, "a2"), "queue a in order")
	assert.Less(t, slices.Index(calls, "b1"), slices.Index(calls, "b2"), "queue b in order")
}

// TestMessageFromContext: the handler sees its message.
func TestMessageFromContext(t *testing.T) {
	t.Parallel()
	var ids []string
	h := rabbitmqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()),
		func(ctx context.Context, p payment) error {
			m, ok := rabbitmqbatch.MessageFromContext(ctx)
			if !ok {
				return errors.New("no message in the context")
			}
			ids = append(ids, *m.BasicProperties.MessageID+"="+p.PaymentID)
			return nil
		})
	require.NoError(t, h(context.Background(), sample(t)))
	assert.Equal(t, []string{"msg-3001=pay_3001", "msg-3002=pay_3002", "msg-3003=pay_3003"}, ids)
	_, ok := rabbitmqbatch.MessageFromContext(context.Background())
	assert.False(t, ok)
}

// TestEmptyBatch: nothing to do is no error.
func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	var rec batchtest.Recorder
	require.NoError(t, newHandler(t, &rec)(context.Background(), events.RabbitMQEvent{}))
	assert.Empty(t, rec.Calls())
}

// TestProgrammerErrors: the panics name this package.
func TestProgrammerErrors(t *testing.T) {
	t.Parallel()
	e := batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock())
	assert.PanicsWithValue(t, "rabbitmqbatch: Wrap: nil handler", func() { rabbitmqbatch.Wrap[payment](e, nil) })
	assert.PanicsWithValue(t, "rabbitmqbatch: WithRecordKey: nil function", func() { rabbitmqbatch.WithRecordKey(nil) })
	assert.PanicsWithValue(t, "rabbitmqbatch: Wrap: nil Engine", func() { rabbitmqbatch.Wrap(nil, handler(&batchtest.Recorder{})) })
	assert.Panics(t, func() {
		rabbitmqbatch.Wrap(e, handler(&batchtest.Recorder{}), rabbitmqbatch.WithKey(func(string) (string, error) { return "", nil }))
	})
}
