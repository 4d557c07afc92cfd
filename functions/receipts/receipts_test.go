package receipts_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/receipts"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/ddbstreams"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// The payments of the sample stream: A (INSERT, then a MODIFY: a refund), B
// and C, and the sequence numbers of its four records.
const (
	payA = "pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X"
	payB = "pay_01JH8Z4A5B6C7D8E9F0G1H2J3K"
	payC = "pay_01JH8Z5M6N7P8Q9R0S1T2V3W4X"

	seqA       = "4421584500000000017450439091"
	seqB       = "4421584500000000017450539091"
	seqAModify = "4421584500000000017450639091"
	seqC       = "4421584500000000017450739091"
)

// stores returns the stores the function is tested on: memory, and
// DynamoDB Local when it runs (scripts/with-dynamodb.sh).
func stores(t *testing.T) map[string]func(t *testing.T) storage.Store {
	return map[string]func(t *testing.T) storage.Store{
		"memory": func(*testing.T) storage.Store { return idempotent.NewMemoryStore() },
		"dynamodb": func(t *testing.T) storage.Store {
			client := localddbtest.Client(t)
			return dynamostore.New(client, localddbtest.Tables(t, client).Idempotency)
		},
	}
}

// sample returns the sample stream batch.
func sample(t *testing.T) events.DynamoDBEvent {
	t.Helper()
	ev, err := samples.DynamoDB(samples.DDBStreamsPayments)
	require.NoError(t, err)
	require.Len(t, ev.Records, 4)
	return ev
}

// from is what Lambda delivers after a checkpoint at seq: that record and
// every later one.
func from(t *testing.T, ev events.DynamoDBEvent, seq string) events.DynamoDBEvent {
	t.Helper()
	i := slices.IndexFunc(ev.Records, func(r events.DynamoDBEventRecord) bool { return r.Change.SequenceNumber == seq })
	require.GreaterOrEqual(t, i, 0, "no record %s", seq)
	return events.DynamoDBEvent{Records: ev.Records[i:]}
}

// outcomes collects the engine's outcome per record (by sequence number).
type outcomes struct {
	mu  sync.Mutex
	seq map[string][]idempotent.Event
}

func (o *outcomes) hook() idempotent.Option {
	return idempotent.WithOutcomeHook(func(ctx context.Context, ev idempotent.Event) {
		r, ok := ddbstreams.RecordFromContext(ctx)
		if !ok {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.seq == nil {
			o.seq = map[string][]idempotent.Event{}
		}
		o.seq[r.Change.SequenceNumber] = append(o.seq[r.Change.SequenceNumber], ev)
	})
}

// last returns the outcome of the last delivery of record seq.
func (o *outcomes) last(seq string) idempotent.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	evs := o.seq[seq]
	if len(evs) == 0 {
		return idempotent.Event{}
	}
	return evs[len(evs)-1]
}

// invoke calls handler as Lambda would, with a function's 30 s deadline.
func invoke(t *testing.T, handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), ev events.DynamoDBEvent) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := handler(ctx, ev)
	require.NoError(t, err, "the handler never fails the whole batch")
	seqs := []string{}
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// failing is a mailer that fails the sends of the payments in fail, then
// passes every send to m.
func failing(m *receipts.LocalMailer, fail ...string) receipts.Mailer {
	return receipts.MailerFunc(func(ctx context.Context, key string, r receipts.Receipt) (string, error) {
		if slices.Contains(fail, r.PaymentID) {
			return "", errors.New("mailer: 503 service unavailable")
		}
		return m.Send(ctx, key, r)
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := receipts.Payment{}
	valid.PaymentID, valid.CustomerID, valid.Amount, valid.Currency = "pay_1", "cus_1", 1, "EUR"
	tests := []struct {
		name   string
		change func(p *receipts.Payment)
		err    string // "" for valid
	}{
		{"valid", func(*receipts.Payment) {}, ""},
		{"no payment id", func(p *receipts.Payment) { p.PaymentID = "" }, "paymentId is required"},
		{"no customer", func(p *receipts.Payment) { p.CustomerID = "" }, "customerId is required"},
		{"zero amount", func(p *receipts.Payment) { p.Amount = 0 }, "amount must be at least 1"},
		{"bad currency", func(p *receipts.Payment) { p.Currency = "EURO" }, "currency must be a three-letter code"},
		{"everything", func(p *receipts.Payment) { *p = receipts.Payment{} },
			"paymentId is required\ncustomerId is required\namount must be at least 1\ncurrency must be a three-letter code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := valid
			tt.change(&p)
			if err := p.Validate(); tt.err == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tt.err)
			}
		})
	}
}

// TestSampleBatch: the sample stream sends one receipt each to A, B and C
// (A's MODIFY is a duplicate of A under a key on the payment), with the
// ledger item's fields; delivered again, it sends nothing and calls the
// mailer not once: every record is replayed from its payment's entry.
func TestSampleBatch(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mailer := &receipts.LocalMailer{}
			var seen outcomes
			handler := receipts.New(newStore(t), mailer, seen.hook())

			assert.Empty(t, invoke(t, handler, sample(t)))
			for _, p := range []string{payA, payB, payC} {
				assert.Equal(t, 1, mailer.Sent(p), p)
			}
			got := mailer.Receipts()
			require.Len(t, got, 3)
			slices.SortFunc(got, func(a, b receipts.Receipt) int { return strings.Compare(a.PaymentID, b.PaymentID) })
			assert.Equal(t, receipts.Receipt{PaymentID: payA, CustomerID: "cus_NffrFeUfNV2Hib", Amount: 2500, Currency: "EUR",
				CapturedAt: "2026-01-01T09:00:00Z"}, got[0])
			assert.Equal(t, idempotent.OutcomeReplayed, seen.last(seqAModify).Outcome, "A's MODIFY replays A's entry")

			assert.Empty(t, invoke(t, handler, sample(t)), "redelivered")
			assert.Len(t, mailer.Receipts(), 3, "no receipt sent again")
			assert.Zero(t, mailer.Deduplicated(), "the mailer was not even asked")
			for _, seq := range []string{seqA, seqB, seqAModify, seqC} {
				assert.Equal(t, idempotent.OutcomeReplayed, seen.last(seq).Outcome, seq)
			}
		})
	}
}

// TestFailureInTheMiddle: B's send fails. The response names B (Lambda
// checkpoints there); A and C, in lanes of their own, are sent. The
// redelivery from B sends B, and replays A's MODIFY and C without sending
// them again.
func TestFailureInTheMiddle(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			mailer := &receipts.LocalMailer{}
			var seen outcomes

			first := receipts.New(store, failing(mailer, payB), seen.hook())
			assert.Equal(t, []string{seqB}, invoke(t, first, sample(t)), "the checkpoint: B and every later record come back")
			assert.Equal(t, 1, mailer.Sent(payA))
			assert.Equal(t, 0, mailer.Sent(payB))
			assert.Equal(t, 1, mailer.Sent(payC), "C's lane does not wait for B's")
			assert.Equal(t, idempotent.OutcomeHandlerError, seen.last(seqB).Outcome)

			again := receipts.New(store, mailer, seen.hook())
			assert.Empty(t, invoke(t, again, from(t, sample(t), seqB)))
			for _, p := range []string{payA, payB, payC} {
				assert.Equal(t, 1, mailer.Sent(p), p)
			}
			assert.Equal(t, idempotent.OutcomeExecuted, seen.last(seqB).Outcome)
			assert.Equal(t, idempotent.OutcomeReplayed, seen.last(seqAModify).Outcome)
			assert.Equal(t, idempotent.OutcomeReplayed, seen.last(seqC).Outcome, "C finished in the first delivery: replayed, not re-run")
			assert.Zero(t, mailer.Deduplicated())
		})
	}
}

// crashAfterSend loses every completion, as if the process died after the
// send step was recorded and before the payment's entry was completed. It
// embeds the memory store, so it records steps.
type crashAfterSend struct{ storage.StepStore }

func (crashAfterSend) Complete(context.Context, storage.Record) error {
	return errors.New("test: the process crashed")
}

// TestTakeoverAnswersTheStep: a crash after the send leaves the payment in
// progress with its send step recorded. A redelivery before the lease ends
// is reported; one after it takes the entry over and gets the step's message
// ID from the record: the mailer is not called again.
func TestTakeoverAnswersTheStep(t *testing.T) {
	t.Parallel()
	mem := idempotent.NewMemoryStore()
	mailer := &receipts.LocalMailer{}
	var seen outcomes
	batch := events.DynamoDBEvent{Records: sample(t).Records[:1]}

	crashed := receipts.New(crashAfterSend{mem}, mailer, seen.hook())
	assert.Empty(t, invoke(t, crashed, batch), "the handler succeeded: reporting it would send again for sure")
	require.Equal(t, 1, mailer.Sent(payA))

	busy := receipts.New(mem, mailer, seen.hook())
	assert.Equal(t, []string{seqA}, invoke(t, busy, batch), "in progress until the dead owner's lease ends")
	assert.ErrorIs(t, seen.last(seqA).Err, idempotent.ErrInProgress)

	later := receipts.New(mem, mailer, seen.hook(), idempotent.WithClock(func() time.Time { return time.Now().Add(time.Minute) }))
	assert.Empty(t, invoke(t, later, batch))
	ev := seen.last(seqA)
	assert.True(t, ev.TookOver)
	assert.True(t, ev.HandlerRan, "the handler ran again, by design")
	assert.Equal(t, 1, mailer.Sent(payA), "its send step was answered from the record")
	assert.Zero(t, mailer.Deduplicated(), "without asking the mailer")
}

// TestLostSendResponse: the mail goes out but its answer is lost, so the
// step fails and nothing is recorded. The redelivery sends again with the
// same key, and the mailer, which honours it, sends nothing more.
func TestLostSendResponse(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			mailer := &receipts.LocalMailer{}
			var keys []string
			lost := receipts.MailerFunc(func(ctx context.Context, key string, r receipts.Receipt) (string, error) {
				keys = append(keys, key)
				if _, err := mailer.Send(ctx, key, r); err != nil {
					return "", err
				}
				return "", errors.New("mailer: connection reset after the request was sent")
			})
			batch := events.DynamoDBEvent{Records: sample(t).Records[:1]}
			assert.Equal(t, []string{seqA}, invoke(t, receipts.New(store, lost), batch))
			assert.Empty(t, invoke(t, receipts.New(store, receipts.MailerFunc(func(ctx context.Context, key string, r receipts.Receipt) (string, error) {
				keys = append(keys, key)
				return mailer.Send(ctx, key, r)
			})), batch))
			require.Len(t, keys, 2)
			assert.Equal(t, keys[0], keys[1], "the same key for every run of the payment's send")
			assert.Len(t, keys[0], 32, "a downstream key")
			assert.Equal(t, 1, mailer.Sent(payA))
			assert.Equal(t, 1, mailer.Deduplicated())
		})
	}
}

// record builds a stream record of the payments table.
func record(name, seq string, keys, newImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		EventID: "ev-" + seq, EventName: name, EventSource: "aws:dynamodb",
		EventSourceArn: "arn:aws:dynamodb:eu-west-1:000000000000:table/Payments/stream/2026-01-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq, Keys: keys, NewImage: newImage,
			StreamViewType: "NEW_AND_OLD_IMAGES"},
	}
}

func image(id string, amount string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		"paymentId":  events.NewStringAttribute(id),
		"customerId": events.NewStringAttribute("cus_1"),
		"amount":     events.NewNumberAttribute(amount),
		"currency":   events.NewStringAttribute("EUR"),
		"status":     events.NewStringAttribute("captured"),
	}
}

func key(id string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{"paymentId": events.NewStringAttribute(id)}
}

// TestRecordsThatSendNothing: changes other than an INSERT send nothing;
// an invalid new image, an INSERT without one and an image that does not
// decode are reported (the first of them is the checkpoint) without calling
// the mailer.
func TestRecordsThatSendNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		rec    events.DynamoDBEventRecord
		report bool
		err    error // the outcome's error, when reported
	}{
		{"modify", record(ddbstreams.Modify, "100", key("pay_m"), image("pay_m", "10")), false, nil},
		{"remove", record(ddbstreams.Remove, "101", key("pay_r"), nil), false, nil},
		{"invalid amount", record(ddbstreams.Insert, "102", key("pay_i"), image("pay_i", "0")), true, idempotent.ErrInvalidPayload},
		{"no new image (a KEYS_ONLY stream)", record(ddbstreams.Insert, "103", key("pay_k"), nil), true, receipts.ErrNoImage},
		{"amount not a number", record(ddbstreams.Insert, "104", key("pay_n"),
			map[string]events.DynamoDBAttributeValue{"paymentId": events.NewStringAttribute("pay_n"), "amount": events.NewStringAttribute("ten")}),
			true, idempotent.ErrInvalidPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mailer := &receipts.LocalMailer{}
			var seen outcomes
			handler := receipts.New(idempotent.NewMemoryStore(), mailer, seen.hook())
			got := invoke(t, handler, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{tt.rec}})
			assert.Empty(t, mailer.Receipts())
			if !tt.report {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, []string{tt.rec.Change.SequenceNumber}, got)
			assert.ErrorIs(t, seen.last(tt.rec.Change.SequenceNumber).Err, tt.err)
		})
	}
}

// stepless is a store that does not record steps (not a StepStore).
type stepless struct{ storage.Store }

func TestStoreWithoutSteps(t *testing.T) {
	t.Parallel()
	mailer := &receipts.LocalMailer{}
	var seen outcomes
	handler := receipts.New(stepless{idempotent.NewMemoryStore()}, mailer, seen.hook())
	assert.Equal(t, []string{seqA}, invoke(t, handler, sample(t)))
	assert.ErrorIs(t, seen.last(seqA).Err, idempotent.ErrInvalidStep)
	assert.Empty(t, mailer.Receipts())
}

func TestNewNeedsMailer(t *testing.T) {
	t.Parallel()
	assert.PanicsWithValue(t, "receipts: New: nil mailer", func() { receipts.New(idempotent.NewMemoryStore(), nil) })
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := receipts.ConfigFromEnv(func(name string) string { return map[string]string{"IDEMPOTENCY_TABLE": "idem"}[name] })
	require.NoError(t, err)
	assert.Equal(t, receipts.Config{IdempotencyTable: "idem"}, cfg)
	_, err = receipts.ConfigFromEnv(func(string) string { return "" })
	assert.ErrorContains(t, err, "IDEMPOTENCY_TABLE")
}
