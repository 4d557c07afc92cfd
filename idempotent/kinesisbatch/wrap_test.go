package kinesisbatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/kinesisbatch"
	"github.com/idemkit/idemkit/internal/batchtest"
)

// payment is the data of the records of events/kinesis-batch.json.
type payment struct {
	PaymentID  string `json:"paymentId"`
	CustomerID string `json:"customerId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

func byPaymentID(p payment) (string, error) { return p.PaymentID, nil }

// sample is events/kinesis-batch.json: pay_1001, pay_1002, pay_1001 again (a
// producer retry: a new sequence number), pay_1003, truncated JSON (poison),
// pay_1005, all on one shard.
func sample(t *testing.T) events.KinesisEvent {
	return batchtest.ReadEvent[events.KinesisEvent](t, "../../events/kinesis-batch.json")
}

func seqs(ev events.KinesisEvent, idx ...int) []string {
	out := []string{}
	for _, i := range idx {
		out = append(out, ev.Records[i].Kinesis.SequenceNumber)
	}
	return out
}

func failed(resp events.KinesisEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// from is what Lambda delivers after a checkpoint at sequence number seq:
// that record and every later one of the shard.
func from(ev events.KinesisEvent, seq string) events.KinesisEvent {
	for i, r := range ev.Records {
		if r.Kinesis.SequenceNumber == seq {
			return events.KinesisEvent{Records: ev.Records[i:]}
		}
	}
	return events.KinesisEvent{}
}

func handler(rec *batchtest.Recorder) func(context.Context, payment) error {
	return func(_ context.Context, p payment) error { return rec.Call(p.PaymentID) }
}

// TestSample runs the sample batch on each store: the poison record stops
// the shard and is the one record reported; the records before it are done,
// the producer's duplicate only under a key on the payment.
func TestSample(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			tests := []struct {
				name      string
				opts      []kinesisbatch.Option
				wantCalls []string
			}{
				{"default key", nil, []string{"pay_1001", "pay_1002", "pay_1001", "pay_1003"}},
				{"keyed on the payment", []kinesisbatch.Option{kinesisbatch.WithKey(byPaymentID)}, []string{"pay_1001", "pay_1002", "pay_1003"}},
				{"continue on failure", []kinesisbatch.Option{kinesisbatch.WithKey(byPaymentID), kinesisbatch.WithContinueOnFailure()},
					[]string{"pay_1001", "pay_1002", "pay_1003", "pay_1005"}},
			}
			for _, tt := range tests {
				var rec batchtest.Recorder
				h := kinesisbatch.Wrap(batchtest.Engine(s.Make(t), batchtest.NewClock()), handler(&rec), tt.opts...)
				resp, err := h(context.Background(), ev)
				require.NoError(t, err, tt.name)
				assert.Equal(t, seqs(ev, 4), failed(resp), "%s: the poison record is the checkpoint", tt.name)
				assert.Equal(t, tt.wantCalls, rec.Calls(), tt.name)
			}
		})
	}
}

// TestFailureInTheMiddle: a handler failure at pay_1002 is the checkpoint;
// the redelivery from there runs pay_1002 again and replays what was done.
func TestFailureInTheMiddle(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			ev.Records = append(ev.Records[:4:4], ev.Records[5]) // without the poison record
			for _, cont := range []bool{false, true} {
				var rec batchtest.Recorder
				opts := []kinesisbatch.Option{kinesisbatch.WithKey(byPaymentID)}
				wantFirst := []string{"pay_1001", "pay_1002"}
				if cont {
					opts = append(opts, kinesisbatch.WithContinueOnFailure())
					wantFirst = []string{"pay_1001", "pay_1002", "pay_1003", "pay_1005"}
				}
				h := kinesisbatch.Wrap(batchtest.Engine(s.Make(t), batchtest.NewClock()), handler(&rec), opts...)
				rec.Fail("pay_1002")
				resp, err := h(context.Background(), ev)
				require.NoError(t, err)
				assert.Equal(t, seqs(ev, 1), failed(resp), "exactly the failed record: Lambda redelivers from it")
				assert.Equal(t, wantFirst, rec.Calls(), "continue=%v", cont)

				rec.Fail()
				resp, err = h(context.Background(), from(ev, failed(resp)[0]))
				require.NoError(t, err)
				assert.Empty(t, failed(resp))
				want := []string{"pay_1002", "pay_1003", "pay_1005"}
				if cont {
					want = []string{"pay_1002"} // the others were done: replayed
				}
				assert.Equal(t, want, rec.Calls(), "continue=%v: only what was not done runs", cont)
			}
		})
	}
}

// TestSameRecordTwice: a record delivered twice in one batch runs once.
func TestSameRecordTwice(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.Records = []events.KinesisEventRecord{ev.Records[0], ev.Records[1], ev.Records[0]}
	var rec batchtest.Recorder
	h := kinesisbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec))
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Empty(t, failed(resp))
	assert.Equal(t, []string{"pay_1001", "pay_1002"}, rec.Calls())
}

// TestCrashMidBatch: the invocation dies while pay_1003 runs (its entry is
// left in progress). Delivered again before the lease ends, the batch
// replays the done records and stops at pay_1003 (in progress elsewhere);
// after the lease, pay_1003 is taken over and runs again, by design.
func TestCrashMidBatch(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			ev.Records = ev.Records[:4]
			clock := batchtest.NewClock()
			crashing := true
			store := &batchtest.CrashStore{Store: s.Make(t), Crashed: func(ctx context.Context) bool {
				r, _ := kinesisbatch.RecordFromContext(ctx)
				return crashing && r.Kinesis.SequenceNumber == ev.Records[3].Kinesis.SequenceNumber
			}}
			var rec batchtest.Recorder
			h := kinesisbatch.Wrap(batchtest.Engine(store, clock, idempotent.WithMaxLease(time.Minute)), handler(&rec), kinesisbatch.WithKey(byPaymentID))
			_, err := h(context.Background(), ev) // its response is lost with the crash
			require.NoError(t, err)
			assert.Equal(t, []string{"pay_1001", "pay_1002", "pay_1003"}, rec.Calls())
			crashing = false

			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, seqs(ev, 3), failed(resp), "in progress under the crashed invocation's lease")
			assert.Empty(t, rec.Calls(), "the records done are replayed")

			clock.Advance(2 * time.Minute)
			resp, err = h(context.Background(), from(ev, failed(resp)[0]))
			require.NoError(t, err)
			assert.Empty(t, failed(resp))
			assert.Equal(t, []string{"pay_1003"}, rec.Calls(), "taken over after the lease")
		})
	}
}

// TestParallelByPartitionKey: records of one partition key stay in order and
// a failure stops only its partition key; the response is the first record
// not done.
func TestParallelByPartitionKey(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	var rec batchtest.Recorder
	h := kinesisbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec),
		kinesisbatch.WithParallelism(2))
	rec.Fail("pay_1001")
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, seqs(ev, 0), failed(resp))
	calls := rec.Calls()
	assert.ElementsMatch(t, []string{"pay_1001", "pay_1002"}, calls,
		"cus_Nffr… stops at pay_1001; cus_Pq7… runs pay_1002 and stops at the poison record")
}

// TestResponseJSON: the response is the documented JSON.
func TestResponseJSON(t *testing.T) {
	t.Parallel()
	h := kinesisbatch.WrapRecord(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()),
		func(context.Context, events.KinesisEventRecord) error { return nil })
	resp, err := h(context.Background(), events.KinesisEvent{})
	require.NoError(t, err)
	got, err := json.Marshal(resp)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(got))
}

// TestProgrammerErrors: the options name this package in their panics, and
// Wrap finds a function of another type than the handler's (the engine's
// rule, tested in internal/batch).
func TestProgrammerErrors(t *testing.T) {
	t.Parallel()
	e := batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock())
	assert.PanicsWithValue(t, "kinesisbatch: WithRecordKey: nil function", func() { kinesisbatch.WithRecordKey(nil) })
	assert.PanicsWithValue(t, "kinesisbatch: WithRecordPayloadValidation: nil function", func() { kinesisbatch.WithRecordPayloadValidation(nil) })
	assert.PanicsWithValue(t, "kinesisbatch: Wrap: the function given to WithKey takes kinesisbatch_test.payment, but the handler takes *kinesisbatch_test.payment", func() {
		kinesisbatch.Wrap(e, func(context.Context, *payment) error { return nil }, kinesisbatch.WithKey(byPaymentID))
	})
	assert.PanicsWithValue(t, "kinesisbatch: WrapRecord: the function given to WithPayloadValidation takes kinesisbatch_test.payment, but the handler takes events.KinesisEventRecord", func() {
		kinesisbatch.WrapRecord(e, func(context.Context, events.KinesisEventRecord) error { return nil },
			kinesisbatch.WithPayloadValidation(func(p payment) (any, error) { return p, nil }))
	})
}
