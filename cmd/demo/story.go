package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/internal/localddb"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// concurrent is how many identical requests the concurrent-duplicates step
// sends at once (and the web-concurrent step, the first and its duplicates).
const concurrent = 5

// story runs the steps in order; an error means the demo could not go on
// (DynamoDB unreachable), not that a step turned out unexpectedly.
func (d *demo) story(ctx context.Context) error {
	fmt.Fprintln(d.w, "\nPayments API: POST /payments with an Idempotency-Key header (API Gateway HTTP API v2 events)")
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"new-payment", d.newPayment}, {"replay", d.replay}, {"concurrent-duplicates", d.concurrentDuplicates},
		{"different-body", d.differentBody}, {"missing-key", d.missingKey}, {"invalid-bodies", d.invalidBodies},
		{"malformed-json", d.malformedJSON}, {"second-caller", d.secondCaller},
		{"crash-after-charge", d.crashAfterCharge}, {"stale-owner", d.staleOwner},
	} {
		d.begin(step.name)
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintln(d.w, "\nOrders consumer: SQS batches, idempotent per orderId, partial batch responses")
	for _, sku := range []string{"SKU-RED-MUG", "SKU-BLUE-CAP"} {
		if err := d.restock(ctx, sku, 100); err != nil {
			return err
		}
	}
	for _, step := range []struct {
		name string
		file string
		what string
		want map[string]int64
	}{
		{"orders-batch", samples.OrdersBatch, "batch: duplicate order, 2 bad messages", map[string]int64{"SKU-RED-MUG": 2, "SKU-BLUE-CAP": 1}},
		{"orders-redelivery", samples.OrdersRedelivery, "the batch redelivered, plus a new order", map[string]int64{"SKU-RED-MUG": 3, "SKU-BLUE-CAP": 1}},
	} {
		d.begin(step.name)
		if err := d.batch(ctx, step.file, step.what, step.want); err != nil {
			return err
		}
	}
	d.begin("out-of-stock")
	if err := d.outOfStock(ctx); err != nil {
		return err
	}
	if err := d.webStory(ctx); err != nil {
		return err
	}
	return d.receiptsStory(ctx) // the receipts function on the payments table's stream (receipts.go)
}

func (d *demo) newPayment(ctx context.Context) error {
	a, err := d.pay(ctx, sample(samples.PaymentNew))
	if err != nil {
		return err
	}
	d.firstPay = a.payment.PaymentID
	d.line("new key", a.String(), a.status == 201 && !a.replayed)
	return nil
}

func (d *demo) replay(ctx context.Context) error {
	a, err := d.pay(ctx, sample(samples.PaymentReplay))
	if err != nil {
		return err
	}
	d.line("same request again (a client retry)", a.String(), a.status == 201 && a.replayed && a.payment.PaymentID == d.firstPay)
	d.detail("same paymentId, same body: the handler did not run")
	return nil
}

func (d *demo) concurrentDuplicates(ctx context.Context) error {
	before, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	ev := withKey(sample(samples.PaymentNew), freshKey())
	answers := make([]answer, concurrent)
	errs := make([]error, concurrent)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], errs[i] = d.pay(ctx, ev)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var executed, replayed, conflict int
	var paid, retryAfter string
	for _, a := range answers {
		switch {
		case a.status == 201 && !a.replayed:
			executed++
			paid = a.payment.PaymentID
		case a.status == 201:
			replayed++
		case a.status == 409:
			conflict++
			retryAfter = a.retry
		}
	}
	after, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	summary := fmt.Sprintf("1× 201 executed, %d× 409 in-progress, %d× 201 replayed", conflict, replayed)
	if executed != 1 {
		summary = fmt.Sprintf("%d× 201 executed, %d× 409, %d× replayed", executed, conflict, replayed)
	}
	d.line(fmt.Sprintf("%d identical requests at once, new key", concurrent), summary,
		executed == 1 && executed+replayed+conflict == concurrent && after-before == 1)
	if conflict > 0 {
		d.detail("409s carry Retry-After: %s; exactly %d new ledger item", retryAfter, after-before)
	}
	retry, err := d.pay(ctx, ev)
	if err != nil {
		return err
	}
	d.detail("a 409'd client retries → %s", retry)
	if !(retry.status == 201 && retry.replayed && retry.payment.PaymentID == paid) {
		d.line("retry after 409", retry.String(), false)
	}
	return nil
}

func (d *demo) differentBody(ctx context.Context) error {
	a, err := d.pay(ctx, sample(samples.PaymentDifferentBody))
	if err != nil {
		return err
	}
	d.line("same key, amount 9900 instead of 2500", a.String(), a.status == 422 && a.problem == "payload-mismatch")
	return nil
}

func (d *demo) missingKey(ctx context.Context) error {
	a, err := d.pay(ctx, sample(samples.PaymentMissingKey))
	if err != nil {
		return err
	}
	d.line("no Idempotency-Key header", a.String(), a.status == 400 && a.problem == "missing-key")
	return nil
}

func (d *demo) invalidBodies(ctx context.Context) error {
	files := []struct{ name, label string }{
		{samples.PaymentInvalidAmountZero, "amount 0"},
		{samples.PaymentInvalidAmountString, `amount "12"`},
		{samples.PaymentInvalidAmountFraction, "amount 12.5"},
	}
	ok := true
	var reasons []string
	for _, f := range files {
		first, err := d.pay(ctx, sample(f.name))
		if err != nil {
			return err
		}
		again, err := d.pay(ctx, sample(f.name))
		if err != nil {
			return err
		}
		ok = ok && first.status == 400 && first.problem == "invalid-request" && again.replayed && again.body == first.body
		var p struct {
			Params []payments.InvalidParam `json:"invalid-params"`
		}
		_ = json.Unmarshal([]byte(first.body), &p)
		for _, ip := range p.Params {
			reasons = append(reasons, fmt.Sprintf("%-12s → %s %s", f.label, ip.Name, ip.Reason))
		}
	}
	d.line(`amount 0, "12", 12.5 (a key each)`, "400 invalid-request ×3; each retried: 400 replayed", ok)
	for _, r := range reasons {
		d.detail("%s", r)
	}
	return nil
}

func (d *demo) malformedJSON(ctx context.Context) error {
	a, err := d.pay(ctx, sample(samples.PaymentMalformedJSON))
	if err != nil {
		return err
	}
	again, err := d.pay(ctx, sample(samples.PaymentMalformedJSON))
	if err != nil {
		return err
	}
	d.line("truncated JSON body", a.String()+"; not stored (retry is not a replay)",
		a.status == 400 && a.problem == "invalid-json" && again.status == 400 && !again.replayed)
	return nil
}

func (d *demo) secondCaller(ctx context.Context) error {
	a, err := d.pay(ctx, sample(samples.PaymentSecondCaller))
	if err != nil {
		return err
	}
	d.line("another caller (JWT sub), same key+body", a.String(),
		a.status == 201 && !a.replayed && a.payment.PaymentID != d.firstPay)
	d.detail("keys are scoped to the caller: no replay of someone else's payment")
	return nil
}

// batch sends an SQS sample and prints each message's fate.
func (d *demo) batch(ctx context.Context, file, what string, want map[string]int64) error {
	ev, err := samples.SQS(file)
	if err != nil {
		return err
	}
	resp, err := d.order(ctx, ev)
	if err != nil {
		return err
	}
	failed := map[string]bool{}
	var failedIDs []string
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
		failedIDs = append(failedIDs, short(f.ItemIdentifier))
	}
	stock, err := d.inventory(ctx)
	if err != nil {
		return err
	}
	wantFailed := []string{"3e7c9f4b", "4f8d0a5c"}
	d.line(what, "batchItemFailures: "+strings.Join(failedIDs, ", "), slices.Equal(failedIDs, wantFailed) && mapsEqual(stock, want))

	d.mu.Lock()
	byMsg := d.byMsg
	d.mu.Unlock()
	for _, m := range ev.Records {
		var o orders.Order
		desc := "(not valid JSON)"
		parsed := json.Unmarshal([]byte(m.Body), &o) == nil
		if parsed {
			desc = fmt.Sprintf("%s %s ×%d", o.OrderID, o.SKU, o.Quantity)
		}
		var fate string
		switch out, ok := byMsg[m.MessageId]; {
		case failed[m.MessageId] && parsed && o.Validate() != nil:
			fate = "failed: " + strings.ReplaceAll(o.Validate().Error(), "\n", "; ")
		case failed[m.MessageId] && (!ok || out.Outcome == idempotent.OutcomeRejected):
			fate = "failed: poison message, SQS retries it, then dead-letters it"
		case failed[m.MessageId]:
			fate = "failed: " + out.Outcome.String()
		case ok && out.Outcome == idempotent.OutcomeExecuted:
			fate = "reserved"
		case ok && out.Outcome == idempotent.OutcomeReplayed:
			fate = "already done: not reserved again"
		case ok:
			fate = out.Outcome.String()
		}
		receive := ""
		if c := m.Attributes["ApproximateReceiveCount"]; c != "1" {
			receive = " (receive " + c + ")"
		}
		d.detail("%s  %-34s %s%s", short(m.MessageId), desc, fate, receive)
	}
	d.detail("inventory: %s", formatStock(stock))
	return nil
}

func short(messageID string) string { return messageID[:8] }

func (d *demo) inventory(ctx context.Context) (map[string]int64, error) {
	items, err := localddb.Scan[orders.InventoryItem](ctx, d.client, d.tables.Inventory)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(items))
	for _, it := range items {
		out[it.SKU] = it.Reserved
	}
	return out, nil
}

func formatStock(stock map[string]int64) string {
	return joinSorted(stock, "%s reserved %d", ", ")
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
