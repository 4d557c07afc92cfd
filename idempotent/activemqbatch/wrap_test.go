package activemqbatch_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/activemqbatch"
	"github.com/idemkit/idemkit/internal/batchtest"
)

type payment struct {
	PaymentID  string `json:"paymentId"`
	CustomerID string `json:"customerId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

// sample is events/activemq.json: destination payments holds pay_4001,
// pay_4002 and pay_4003, in that order.
func sample(t *testing.T) events.ActiveMQEvent {
	return batchtest.ReadEvent[events.ActiveMQEvent](t, "../../events/activemq.json")
}

func handler(rec *batchtest.Recorder) func(context.Context, payment) error {
	return func(_ context.Context, p payment) error { return rec.Call(p.PaymentID) }
}

func newHandler(t *testing.T, rec *batchtest.Recorder, opts ...activemqbatch.Option) func(context.Context, events.ActiveMQEvent) error {
	t.Helper()
	return activemqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(rec), opts...)
}

// ids returns the message IDs of ev's messages at the indexes given.
func ids(ev events.ActiveMQEvent, idx ...int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = ev.Messages[j].MessageID
	}
	return out
}

// notDone returns the message IDs of err, an *activemqbatch.BatchError.
func notDone(t *testing.T, err error) []string {
	t.Helper()
	var berr *activemqbatch.BatchError
	require.ErrorAs(t, err, &berr)
	assert.ErrorIs(t, err, activemqbatch.ErrNotDone)
	return berr.MessageIDs
}

// TestFailureRedelivered: a failure in the middle of the batch stops it and
// fails the invocation; the whole batch, delivered again, replays what was
// done and runs the rest, so each handler runs once in the end.
func TestFailureRedelivered(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			var rec batchtest.Recorder
			h := activemqbatch.Wrap(batchtest.Engine(s.Make(t), batchtest.NewClock()), handler(&rec))
			rec.Fail("pay_4002")
			err := h(context.Background(), ev)
			assert.Equal(t, ids(ev, 1, 2), notDone(t, err), "the failed message and the one after it")
			assert.NotErrorIs(t, err, activemqbatch.ErrNoMessageID)
			assert.Equal(t, []string{"pay_4001", "pay_4002"}, rec.Calls(), "pay_4003 is not run after a failure")

			rec.Fail()
			for i := range ev.Messages {
				ev.Messages[i].Redelivered = true // a hint only: not part of the key
			}
			require.NoError(t, h(context.Background(), ev))
			assert.Equal(t, []string{"pay_4002", "pay_4003"}, rec.Calls(), "pay_4001 is replayed from its record")

			require.NoError(t, h(context.Background(), ev))
			assert.Empty(t, rec.Calls(), "every message is done: a third delivery runs nothing")
		})
	}
}

// TestNoMessageID: under the default key a message without a messageID
// fails with ErrNoMessageID; with a key option it runs.
func TestNoMessageID(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.Messages[1].MessageID = ""
	var rec batchtest.Recorder
	err := newHandler(t, &rec)(context.Background(), ev)
	assert.Equal(t, []string{"", ev.Messages[2].MessageID}, notDone(t, err))
	assert.ErrorIs(t, err, activemqbatch.ErrNoMessageID)
	assert.ErrorIs(t, err, idempotent.ErrMissingKey)
	assert.Equal(t, []string{"pay_4001"}, rec.Calls())

	byPayment := activemqbatch.WithKey(func(p payment) (string, error) { return p.PaymentID, nil })
	require.NoError(t, newHandler(t, &rec, byPayment)(context.Background(), ev))
	assert.Equal(t, []string{"pay_4001", "pay_4002", "pay_4003"}, rec.Calls())
}

// TestUndecodable: data that is not base64, not JSON or JSON null fails its
// message without calling the handler, and stops the batch.
func TestUndecodable(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		"not base64!",
		base64.StdEncoding.EncodeToString([]byte(`{"paymentId":`)),
		base64.StdEncoding.EncodeToString([]byte(`null`)),
		base64.StdEncoding.EncodeToString([]byte(`{"amount":"12"}`)),
	} {
		ev := sample(t)
		ev.Messages[1].Data = data
		var rec batchtest.Recorder
		err := newHandler(t, &rec)(context.Background(), ev)
		assert.Equal(t, ids(ev, 1, 2), notDone(t, err), "data %q", data)
		assert.Equal(t, []string{"pay_4001"}, rec.Calls())
	}
}

// TestSameMessageTwice: a message twice in one batch runs once.
func TestSameMessageTwice(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.Messages = append(ev.Messages, ev.Messages[0])
	var rec batchtest.Recorder
	require.NoError(t, newHandler(t, &rec)(context.Background(), ev))
	assert.Equal(t, []string{"pay_4001", "pay_4002", "pay_4003"}, rec.Calls())
}

// TestOrderPerDestination: messages run in batch order; a failure stops its
// own destination only.
func TestOrderPerDestination(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	other := ev.Messages[0]
	other.MessageID, other.Destination.PhysicalName = "ID:other:1", "refunds"
	other.Data = base64.StdEncoding.EncodeToString([]byte(`{"paymentId":"pay_7001"}`))
	ev.Messages = append(ev.Messages, other)
	var rec batchtest.Recorder
	h := newHandler(t, &rec)
	rec.Fail("pay_4001")
	err := h(context.Background(), ev)
	assert.Equal(t, ids(ev, 0, 1, 2), notDone(t, err))
	assert.Equal(t, []string{"pay_4001", "pay_7001"}, rec.Calls())

	rec.Fail()
	require.NoError(t, h(context.Background(), ev))
	assert.Equal(t, []string{"pay_4001", "pay_4002", "pay_4003"}, rec.Calls())
}

// TestMessageFromContext: the handler sees its message.
func TestMessageFromContext(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	var got []string
	h := activemqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()),
		func(ctx context.Context, _ payment) error {
			m, ok := activemqbatch.MessageFromContext(ctx)
			if !ok {
				return errors.New("no message in the context")
			}
			got = append(got, m.MessageID)
			return nil
		})
	require.NoError(t, h(context.Background(), ev))
	assert.Equal(t, ids(ev, 0, 1, 2), got)
	_, ok := activemqbatch.MessageFromContext(context.Background())
	assert.False(t, ok)
}

// TestEmptyBatch: nothing to do is no error.
func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	var rec batchtest.Recorder
	require.NoError(t, newHandler(t, &rec)(context.Background(), events.ActiveMQEvent{}))
	assert.Empty(t, rec.Calls())
}

// TestProgrammerErrors: the panics name this package.
func TestProgrammerErrors(t *testing.T) {
	t.Parallel()
	e := batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock())
	assert.PanicsWithValue(t, "activemqbatch: Wrap: nil handler", func() { activemqbatch.Wrap[payment](e, nil) })
	assert.PanicsWithValue(t, "activemqbatch: WithRecordKey: nil function", func() { activemqbatch.WithRecordKey(nil) })
	assert.PanicsWithValue(t, "activemqbatch: Wrap: nil Engine", func() { activemqbatch.Wrap(nil, handler(&batchtest.Recorder{})) })
}
