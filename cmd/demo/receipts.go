package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/receipts"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/ddbstreams"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// receiptsTimeout is the receipts function's timeout in the stack
// (infra/receipts.go).
const receiptsTimeout = 30 * time.Second

// receiptsScene is the stream scene: the receipts function on the payments
// table's stream, its mailer down for one payment of the first delivery.
type receiptsScene struct {
	mailer  *receipts.LocalMailer
	down    atomic.Bool // the mailer fails payment B's sends
	calls   atomic.Int32
	handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

	mu  sync.Mutex
	seq map[string]idempotent.Event // this delivery's outcome per sequence number
	// responses holds each delivery's batch response, for the test.
	responses []events.DynamoDBEventResponse
}

// The sample stream's payments: A is inserted, then refunded (a MODIFY).
var receiptNames = map[string]string{
	"pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X": "A",
	"pay_01JH8Z4A5B6C7D8E9F0G1H2J3K": "B",
	"pay_01JH8Z5M6N7P8Q9R0S1T2V3W4X": "C",
}

// receiptsStory delivers events/ddbstreams-payments.json to the receipts
// function with the mailer down for B (the second record), shows the batch
// response, delivers again from the checkpoint it names, and shows that
// every payment got one receipt and the records done were replayed.
func (d *demo) receiptsStory(ctx context.Context) error {
	ev, err := samples.DynamoDB(samples.DDBStreamsPayments)
	if err != nil {
		return err
	}
	r := &receiptsScene{mailer: &receipts.LocalMailer{}}
	d.receipts = r
	mailer := receipts.MailerFunc(func(ctx context.Context, key string, rc receipts.Receipt) (string, error) {
		r.calls.Add(1)
		if r.down.Load() && receiptNames[rc.PaymentID] == "B" {
			return "", errors.New("mailer: 503 service unavailable")
		}
		return r.mailer.Send(ctx, key, rc)
	})
	r.handler = receipts.New(d.store, mailer, idempotent.WithOutcomeHook(func(ctx context.Context, e idempotent.Event) {
		rec, ok := ddbstreams.RecordFromContext(ctx)
		if !ok {
			return
		}
		r.mu.Lock()
		r.seq[rec.Change.SequenceNumber] = e
		r.mu.Unlock()
		d.mu.Lock()
		if _, seen := d.recordStep[e.RecordID]; !seen && e.RecordID != "" {
			d.recordStep[e.RecordID] = d.cur
		}
		d.mu.Unlock()
	}))

	fmt.Fprintf(d.w, "\nReceipts: the payments table's DynamoDB stream (%s) → functions/receipts,\n"+
		"one receipt per payment (ddbstreams.Wrap keyed by paymentId, the send a step), partial batch responses\n", samples.DDBStreamsPayments)

	// The first delivery: the mailer fails B.
	d.begin("receipts-checkpoint")
	r.down.Store(true)
	resp, err := r.deliver(ctx, ev)
	if err != nil {
		return err
	}
	seqB := ev.Records[1].Change.SequenceNumber
	checkpoint := len(resp.BatchItemFailures) == 1 && resp.BatchItemFailures[0].ItemIdentifier == seqB
	d.line("A, B, A refunded, C; the mailer fails B", "response "+jsonOf(resp),
		checkpoint && r.sent("A") == 1 && r.sent("B") == 0 && r.sent("C") == 1 &&
			r.outcome(ev.Records[2]) == idempotent.OutcomeReplayed)
	r.explain(d, ev, map[string]string{
		"A":        "receipt sent",
		"B":        "the mailer failed: entry given back, and the checkpoint: Lambda resumes the shard here",
		"A MODIFY": "keyed by payment, a duplicate of A: a refund sends no receipt",
		"C":        "receipt sent: another payment's lane does not wait for B",
	})

	// Lambda delivers the shard again from the checkpoint: B and every
	// later record, the ones already done included.
	d.begin("receipts-redelivery")
	r.down.Store(false)
	again := events.DynamoDBEvent{Records: ev.Records[1:]}
	resp, err = r.deliver(ctx, again)
	if err != nil {
		return err
	}
	d.line("redelivered from B: B, A refunded, C", "response "+jsonOf(resp),
		len(resp.BatchItemFailures) == 0 && r.sent("A") == 1 && r.sent("B") == 1 && r.sent("C") == 1 &&
			r.outcome(again.Records[0]) == idempotent.OutcomeExecuted &&
			r.outcome(again.Records[1]) == idempotent.OutcomeReplayed &&
			r.outcome(again.Records[2]) == idempotent.OutcomeReplayed)
	r.explain(d, again, map[string]string{
		"B":        "receipt sent: the mailer is back",
		"A MODIFY": "from A's entry, as before",
		"C":        "done in the first delivery: replayed from its entry, not sent again",
	})
	d.detail("receipts sent: A %d, B %d, C %d; the mailer was called %d times, one of them failed",
		r.sent("A"), r.sent("B"), r.sent("C"), r.calls.Load())
	return nil
}

// deliver invokes the function as its event source mapping would and keeps
// the outcomes of this delivery only.
func (r *receiptsScene) deliver(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	r.mu.Lock()
	r.seq = map[string]idempotent.Event{}
	r.mu.Unlock()
	resp, err := invoke[events.DynamoDBEventResponse](ctx, r.handler, receiptsTimeout, ev)
	if err == nil {
		r.responses = append(r.responses, resp)
	}
	return resp, err
}

// sent returns the receipts sent to payment A, B or C.
func (r *receiptsScene) sent(name string) int {
	for id, n := range receiptNames {
		if n == name {
			return r.mailer.Sent(id)
		}
	}
	return 0
}

// outcome returns the outcome of rec in the last delivery.
func (r *receiptsScene) outcome(rec events.DynamoDBEventRecord) idempotent.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq[rec.Change.SequenceNumber].Outcome
}

// explain prints one line per record: its sequence number, change, payment,
// outcome, and why, by the record's name in why ("A", "A MODIFY", ...).
func (r *receiptsScene) explain(d *demo, ev events.DynamoDBEvent, why map[string]string) {
	for _, rec := range ev.Records {
		id := rec.Change.Keys["paymentId"].String()
		name := receiptNames[id]
		if rec.EventName != ddbstreams.Insert {
			name += " " + rec.EventName
		}
		seq := rec.Change.SequenceNumber
		d.detail("…%s  %-6s %s… (%s)  %-13s %s", seq[len(seq)-8:], rec.EventName, id[:12], receiptNames[id], r.outcome(rec), why[name])
	}
}

// jsonOf is v as JSON, for printing.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
