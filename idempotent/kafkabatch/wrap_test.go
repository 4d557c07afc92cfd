package kafkabatch_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/kafkabatch"
	"github.com/idemkit/idemkit/internal/batchtest"
)

type payment struct {
	PaymentID  string `json:"paymentId"`
	CustomerID string `json:"customerId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

// sample is events/kafka-batch.json: payments-0 holds pay_2001 (offset 15),
// pay_2002 (16) and pay_2001 again (17, a producer retry with the same
// idempotency-key header); payments-1 holds pay_2003 (40) and pay_2004 (41).
func sample(t *testing.T) events.KafkaEvent {
	return batchtest.ReadEvent[events.KafkaEvent](t, "../../events/kafka-batch.json")
}

func id(partition string, offset int64) kafkabatch.ItemIdentifier {
	return kafkabatch.ItemIdentifier{Partition: partition, Offset: offset}
}

func failed(resp kafkabatch.Response) []kafkabatch.ItemIdentifier {
	out := []kafkabatch.ItemIdentifier{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// from is what Lambda delivers after resp: each reported partition from its
// offset on (the partitions not reported are checkpointed past the batch).
func from(ev events.KafkaEvent, resp kafkabatch.Response) events.KafkaEvent {
	out := ev
	out.Records = map[string][]events.KafkaRecord{}
	for _, f := range resp.BatchItemFailures {
		for i, r := range ev.Records[f.ItemIdentifier.Partition] {
			if r.Offset == f.ItemIdentifier.Offset {
				out.Records[f.ItemIdentifier.Partition] = ev.Records[f.ItemIdentifier.Partition][i:]
			}
		}
	}
	return out
}

func byHeader(r events.KafkaRecord) (string, error) {
	v, _ := kafkabatch.Header(r, "idempotency-key")
	return string(v), nil
}

func handler(rec *batchtest.Recorder) func(context.Context, payment) error {
	return func(_ context.Context, p payment) error { return rec.Call(p.PaymentID) }
}

// TestPartitionsFailIndependently: a failure in each partition is reported
// for that partition only, exactly; the records before it are done and the
// redelivery replays what was done, runs the rest.
func TestPartitionsFailIndependently(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			var rec batchtest.Recorder
			h := kafkabatch.Wrap(batchtest.Engine(s.Make(t), batchtest.NewClock()), handler(&rec),
				kafkabatch.WithRecordKey(byHeader), kafkabatch.WithParallelism(2))
			rec.Fail("pay_2002", "pay_2003")
			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, []kafkabatch.ItemIdentifier{id("payments-0", 16), id("payments-1", 40)}, failed(resp))
			assert.ElementsMatch(t, []string{"pay_2001", "pay_2002", "pay_2003"}, rec.Calls())

			rec.Fail()
			resp, err = h(context.Background(), from(ev, resp))
			require.NoError(t, err)
			assert.Empty(t, failed(resp))
			assert.ElementsMatch(t, []string{"pay_2002", "pay_2003", "pay_2004"}, rec.Calls(),
				"offset 17 repeats pay_2001's header: a duplicate, not run")
		})
	}
}

// TestOnePartitionFails: the other partition is done and not reported.
func TestOnePartitionFails(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	var rec batchtest.Recorder
	h := kafkabatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec))
	rec.Fail("pay_2004")
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, []kafkabatch.ItemIdentifier{id("payments-1", 41)}, failed(resp))
	assert.Equal(t, []string{"pay_2001", "pay_2002", "pay_2001", "pay_2003", "pay_2004"}, rec.Calls(),
		"partitions in key order, records in offset order; under the default key the producer's retry runs again")
}

// TestUndecodableValue: a value that is not JSON (or a tombstone) stops its
// partition without calling the handler.
func TestUndecodableValue(t *testing.T) {
	t.Parallel()
	for _, value := range []string{base64.StdEncoding.EncodeToString([]byte(`{"paymentId":`)), "not base64!", ""} {
		ev := sample(t)
		ev.Records["payments-0"][1].Value = value
		var rec batchtest.Recorder
		h := kafkabatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec))
		resp, err := h(context.Background(), ev)
		require.NoError(t, err)
		assert.Equal(t, []kafkabatch.ItemIdentifier{id("payments-0", 16)}, failed(resp), "value %q", value)
		assert.Equal(t, []string{"pay_2001", "pay_2003", "pay_2004"}, rec.Calls())
	}
}

// TestSameRecordTwice: a record delivered twice in one batch runs once.
func TestSameRecordTwice(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.Records["payments-1"] = append(ev.Records["payments-1"], ev.Records["payments-1"][0])
	var rec batchtest.Recorder
	h := kafkabatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec),
		kafkabatch.WithKey(func(p payment) (string, error) { return p.PaymentID, nil }))
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Empty(t, failed(resp))
	assert.Equal(t, []string{"pay_2001", "pay_2002", "pay_2003", "pay_2004"}, rec.Calls())
}

// TestCrashMidBatch: the invocation dies while pay_2003 runs; after the lease
// it is taken over, the rest replayed.
func TestCrashMidBatch(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			clock := batchtest.NewClock()
			crashing := true
			store := &batchtest.CrashStore{Store: s.Make(t), Crashed: func(ctx context.Context) bool {
				r, _ := kafkabatch.RecordFromContext(ctx)
				return crashing && r.Partition == 1 && r.Offset == 40
			}}
			var rec batchtest.Recorder
			h := kafkabatch.Wrap(batchtest.Engine(store, clock, idempotent.WithMaxLease(time.Minute)), handler(&rec))
			_, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Len(t, rec.Calls(), 5)
			crashing = false

			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, []kafkabatch.ItemIdentifier{id("payments-1", 40)}, failed(resp))
			assert.Empty(t, rec.Calls())

			clock.Advance(2 * time.Minute)
			resp, err = h(context.Background(), from(ev, resp))
			require.NoError(t, err)
			assert.Empty(t, failed(resp))
			assert.Equal(t, []string{"pay_2003"}, rec.Calls())
		})
	}
}

// TestResponseJSON: the JSON AWS documents for Kafka partial batch responses.
func TestResponseJSON(t *testing.T) {
	t.Parallel()
	got, err := json.Marshal(kafkabatch.Response{BatchItemFailures: []kafkabatch.BatchItemFailure{{ItemIdentifier: id("payments-0", 16)}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[{"itemIdentifier":{"partition":"payments-0","offset":16}}]}`, string(got))

	h := kafkabatch.WrapRecord(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()),
		func(context.Context, events.KafkaRecord) error { return nil })
	resp, err := h(context.Background(), events.KafkaEvent{})
	require.NoError(t, err)
	got, err = json.Marshal(resp)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(got))
}

// TestProgrammerErrors: the options name this package in their panics, and
// Wrap finds a function of another type than the handler's (the engine's
// rule, tested in internal/batch).
func TestProgrammerErrors(t *testing.T) {
	t.Parallel()
	e := batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock())
	assert.PanicsWithValue(t, "kafkabatch: WithRecordKey: nil function", func() { kafkabatch.WithRecordKey(nil) })
	assert.PanicsWithValue(t, "kafkabatch: WithRecordPayloadValidation: nil function", func() { kafkabatch.WithRecordPayloadValidation(nil) })
	assert.PanicsWithValue(t, "kafkabatch: Wrap: the function given to WithKey takes kafkabatch_test.payment, but the handler takes *kafkabatch_test.payment", func() {
		kafkabatch.Wrap(e, func(context.Context, *payment) error { return nil },
			kafkabatch.WithKey(func(p payment) (string, error) { return p.PaymentID, nil }))
	})
}

// TestRecordPayloadValidation: the raw record's payload option reaches the
// engine: a producer's retry (offset 17, pay_2001's header) whose value
// differs is a mismatch, not a duplicate.
func TestRecordPayloadValidation(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.Records["payments-0"][2].Value = base64.StdEncoding.EncodeToString([]byte(`{"paymentId":"pay_2001","amount":1}`))
	var rec batchtest.Recorder
	h := kafkabatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec),
		kafkabatch.WithRecordKey(byHeader),
		kafkabatch.WithRecordPayloadValidation(func(r events.KafkaRecord) (any, error) { return r.Value, nil }))
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, []kafkabatch.ItemIdentifier{id("payments-0", 17)}, failed(resp))
	assert.Equal(t, []string{"pay_2001", "pay_2002", "pay_2003", "pay_2004"}, rec.Calls())
}
