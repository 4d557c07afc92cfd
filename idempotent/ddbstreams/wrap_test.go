package ddbstreams_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/ddbstreams"
	"github.com/idemkit/idemkit/internal/batchtest"
)

// payment is an item of the payments table (functions/payments' LedgerItem).
type payment struct {
	PaymentID  string `dynamodbav:"paymentId"`
	CustomerID string `dynamodbav:"customerId"`
	Amount     int64  `dynamodbav:"amount"`
	Currency   string `dynamodbav:"currency"`
	Status     string `dynamodbav:"status"`
}

// sample is events/ddbstreams-payments.json: INSERT of payment A, INSERT of
// B, MODIFY of A (refunded), INSERT of C.
func sample(t *testing.T) events.DynamoDBEvent {
	return batchtest.ReadEvent[events.DynamoDBEvent](t, "../../events/ddbstreams-payments.json")
}

func seqs(ev events.DynamoDBEvent, idx ...int) []string {
	out := []string{}
	for _, i := range idx {
		out = append(out, ev.Records[i].Change.SequenceNumber)
	}
	return out
}

func failed(resp events.DynamoDBEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func from(ev events.DynamoDBEvent, seq string) events.DynamoDBEvent {
	for i, r := range ev.Records {
		if r.Change.SequenceNumber == seq {
			return events.DynamoDBEvent{Records: ev.Records[i:]}
		}
	}
	return events.DynamoDBEvent{}
}

// receipts is the receipts function of the sample stack, in a few lines:
// one receipt per payment, keyed on the payment.
func receipts(e *idempotent.Engine, rec *batchtest.Recorder, opts ...ddbstreams.Option) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return ddbstreams.Wrap(e, func(_ context.Context, c ddbstreams.Change[payment]) error {
		if c.EventName != ddbstreams.Insert {
			return nil
		}
		return rec.Call(c.NewImage.PaymentID)
	}, append([]ddbstreams.Option{ddbstreams.WithKey(func(c ddbstreams.Change[payment]) (string, error) {
		return "receipt/" + c.Key.PaymentID, nil
	})}, opts...)...)
}

func TestChangeDecoded(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	var got []ddbstreams.Change[payment]
	h := ddbstreams.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()),
		func(_ context.Context, c ddbstreams.Change[payment]) error {
			got = append(got, c)
			return nil
		})
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Empty(t, failed(resp))
	require.Len(t, got, 4)
	assert.Equal(t, ddbstreams.Insert, got[0].EventName)
	assert.Nil(t, got[0].OldImage)
	assert.Equal(t, payment{PaymentID: "pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X", CustomerID: "cus_NffrFeUfNV2Hib", Amount: 2500, Currency: "EUR", Status: "captured"}, *got[0].NewImage)
	assert.Equal(t, ddbstreams.Modify, got[2].EventName)
	assert.Equal(t, "captured", got[2].OldImage.Status)
	assert.Equal(t, "refunded", got[2].NewImage.Status)
	assert.Equal(t, &types.AttributeValueMemberS{Value: "pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X"}, got[2].Keys["paymentId"])
	assert.Equal(t, ev.Records[2].Change.SequenceNumber, got[2].SequenceNumber)
	assert.Equal(t, payment{PaymentID: "pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X"}, got[2].Key, "only the key fields")
}

// TestReceipts: one receipt per payment; a failure in the middle is the
// checkpoint, and the redelivery from there replays what was done.
func TestReceipts(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			var rec batchtest.Recorder
			h := receipts(batchtest.Engine(s.Make(t), batchtest.NewClock()), &rec)
			rec.Fail("pay_01JH8Z4A5B6C7D8E9F0G1H2J3K")
			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, seqs(ev, 1), failed(resp), "the failed record, exactly")
			assert.Equal(t, []string{"pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X", "pay_01JH8Z4A5B6C7D8E9F0G1H2J3K"}, rec.Calls())

			rec.Fail()
			again := from(ev, failed(resp)[0])
			again.Records = append(again.Records, ev.Records[0]) // and A's INSERT once more: a duplicate
			resp, err = h(context.Background(), again)
			require.NoError(t, err)
			assert.Empty(t, failed(resp))
			assert.Equal(t, []string{"pay_01JH8Z4A5B6C7D8E9F0G1H2J3K", "pay_01JH8Z5M6N7P8Q9R0S1T2V3W4X"}, rec.Calls(),
				"B and C once; A's MODIFY and INSERT are duplicates of its receipt")
		})
	}
}

// TestUndecodableImage: an image that does not decode into the item type
// stops the shard there, without calling the handler.
func TestUndecodableImage(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	ev.Records[1].Change.NewImage["amount"] = events.NewStringAttribute("ten")
	var rec batchtest.Recorder
	h := receipts(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), &rec)
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, seqs(ev, 1), failed(resp))
	assert.Equal(t, []string{"pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X"}, rec.Calls())
}

// TestCrashMidBatch: the invocation dies while B's receipt is sent. Before
// the lease ends, B is in progress elsewhere and stops the shard; after it,
// B is taken over.
func TestCrashMidBatch(t *testing.T) {
	t.Parallel()
	for _, s := range batchtest.Stores() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			clock := batchtest.NewClock()
			crashing := true
			store := &batchtest.CrashStore{Store: s.Make(t), Crashed: func(ctx context.Context) bool {
				r, _ := ddbstreams.RecordFromContext(ctx)
				return crashing && r.EventID == ev.Records[1].EventID
			}}
			var rec batchtest.Recorder
			h := receipts(batchtest.Engine(store, clock, idempotent.WithMaxLease(time.Minute)), &rec)
			_, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Len(t, rec.Calls(), 3)
			crashing = false

			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			assert.Equal(t, seqs(ev, 1), failed(resp))
			assert.Empty(t, rec.Calls())

			clock.Advance(2 * time.Minute)
			resp, err = h(context.Background(), from(ev, failed(resp)[0]))
			require.NoError(t, err)
			assert.Empty(t, failed(resp))
			assert.Equal(t, []string{"pay_01JH8Z4A5B6C7D8E9F0G1H2J3K"}, rec.Calls())
		})
	}
}

// TestParallelByItem: changes of one item stay in order; other items go on.
func TestParallelByItem(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	var got []string
	var rec batchtest.Recorder
	h := ddbstreams.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()),
		func(_ context.Context, c ddbstreams.Change[payment]) error {
			return rec.Call(c.EventName + " " + c.NewImage.PaymentID)
		}, ddbstreams.WithParallelism(3))
	rec.Fail("INSERT pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X")
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, seqs(ev, 0), failed(resp))
	got = rec.Calls()
	assert.ElementsMatch(t, []string{"INSERT pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X", "INSERT pay_01JH8Z4A5B6C7D8E9F0G1H2J3K", "INSERT pay_01JH8Z5M6N7P8Q9R0S1T2V3W4X"}, got,
		"A's MODIFY waits behind its failed INSERT")
}

func TestAttributeValues(t *testing.T) {
	t.Parallel()
	in := map[string]events.DynamoDBAttributeValue{
		"b":  events.NewBinaryAttribute([]byte{1, 2}),
		"t":  events.NewBooleanAttribute(true),
		"bs": events.NewBinarySetAttribute([][]byte{{3}}),
		"l":  events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("x"), events.NewNumberAttribute("1")}),
		"m":  events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"n": events.NewNullAttribute()}),
		"n":  events.NewNumberAttribute("12345678901234567890"),
		"ns": events.NewNumberSetAttribute([]string{"1", "2"}),
		"s":  events.NewStringAttribute("hello"),
		"ss": events.NewStringSetAttribute([]string{"a"}),
	}
	want := map[string]types.AttributeValue{
		"b":  &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"t":  &types.AttributeValueMemberBOOL{Value: true},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{3}}},
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "1"}}},
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberNULL{Value: true}}},
		"n":  &types.AttributeValueMemberN{Value: "12345678901234567890"},
		"ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"s":  &types.AttributeValueMemberS{Value: "hello"},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a"}},
	}
	got, err := ddbstreams.AttributeValues(in)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = ddbstreams.AttributeValues(nil)
	require.NoError(t, err)
	assert.Nil(t, got)
}

// TestProgrammerErrors: the options name this package in their panics, and
// Wrap finds a function of another item type than the handler's (the
// engine's rule, tested in internal/batch).
func TestProgrammerErrors(t *testing.T) {
	t.Parallel()
	e := batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock())
	assert.PanicsWithValue(t, "ddbstreams: WithRecordKey: nil function", func() { ddbstreams.WithRecordKey(nil) })
	assert.PanicsWithValue(t, "ddbstreams: WithRecordPayloadValidation: nil function", func() { ddbstreams.WithRecordPayloadValidation(nil) })
	assert.PanicsWithValue(t, "ddbstreams: Wrap: the function given to WithKey takes ddbstreams.Change[*github.com/idemkit/idemkit/idempotent/ddbstreams_test.payment], but the handler takes ddbstreams.Change[github.com/idemkit/idemkit/idempotent/ddbstreams_test.payment]", func() {
		ddbstreams.Wrap(e, func(context.Context, ddbstreams.Change[payment]) error { return nil },
			ddbstreams.WithKey(func(c ddbstreams.Change[*payment]) (string, error) { return "k", nil }))
	})
}

// TestPayloadOptions: no payload validation by default (a later change of
// an item keyed on the item is a duplicate); WithRecordPayloadValidation
// makes it a mismatch, and WithoutPayloadValidation, given last, undoes it.
func TestPayloadOptions(t *testing.T) {
	t.Parallel()
	byNewImage := ddbstreams.WithRecordPayloadValidation(func(r events.DynamoDBEventRecord) (any, error) {
		return r.Change.NewImage["status"].String(), nil
	})
	tests := []struct {
		name     string
		opts     []ddbstreams.Option
		wantFail []string
	}{
		{"default: none", nil, []string{}},
		{"WithRecordPayloadValidation", []ddbstreams.Option{byNewImage}, []string{"A's MODIFY"}},
		{"WithoutPayloadValidation last", []ddbstreams.Option{byNewImage, ddbstreams.WithoutPayloadValidation()}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := sample(t)
			var rec batchtest.Recorder
			resp, err := receipts(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), &rec,
				append([]ddbstreams.Option{ddbstreams.WithContinueOnFailure()}, tt.opts...)...)(context.Background(), ev)
			require.NoError(t, err)
			want := []string{}
			if len(tt.wantFail) > 0 {
				want = seqs(ev, 2)
			}
			assert.Equal(t, want, failed(resp))
		})
	}
}
