package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// The transaction scenes: the payments function's charge is a step and its
// ledger row commits with its completion; the orders function's stock
// reservation commits with its completion.

// deadClient is the store's client in a process that dies after its
// handler returned and before its transaction reached DynamoDB: nothing it
// sends from then on arrives, not even the write with which a live process
// settles an unknown commit (it would give the record back at once).
type deadClient struct {
	*dynamodb.Client
	dead *atomic.Bool
}

var errDied = errors.New("demo: the process died before its transaction was sent")

func (c deadClient) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.dead.Store(true)
	return nil, errDied
}

func (c deadClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.dead.Load() {
		return nil, errDied
	}
	return c.Client.UpdateItem(ctx, in, optFns...)
}

func (c deadClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if c.dead.Load() {
		return nil, errDied
	}
	return c.Client.DeleteItem(ctx, in, optFns...)
}

// later is the clock of a process a minute later: past the lease of any
// invocation the demo started.
func later() time.Time { return time.Now().Add(time.Minute) }

// ledgerRows counts the ledger rows of a payment.
func (d *demo) ledgerRows(ctx context.Context, paymentID string) (int, error) {
	items, err := localddb.Scan[payments.LedgerItem](ctx, d.client, d.tables.Payments)
	n := 0
	for _, it := range items {
		if it.PaymentID == paymentID {
			n++
		}
	}
	return n, err
}

func (d *demo) crashAfterCharge(ctx context.Context) error {
	ev := withKey(sample(samples.PaymentNew), freshKey())
	charges := d.processor.Charges()
	crashed := payments.New(dynamostore.New(deadClient{d.client, new(atomic.Bool)}, d.tables.Idempotency), d.processor, d.client, d.tables.Payments,
		idempotent.WithOutcomeHook(d.hook("payments")))
	first, err := d.payWith(ctx, crashed, ev)
	if err != nil {
		return err
	}
	busy, err := d.pay(ctx, ev)
	if err != nil {
		return err
	}
	d.line("crash after the charge, before completing", fmt.Sprintf("%d; retry: %s", first.status, busy), first.status >= 500 && busy.status == 409 && d.processor.Charges() == charges+1)
	d.detail("why: the charge step is in the record; no ledger row, no completion: the lease runs on")
	d.detail("the crash is simulated: a client that never sends the transaction stands in for a")
	d.detail("process that died, so that invocation reports store_error (a real crash reports nothing)")

	calls := d.processor.Calls()
	restarted := payments.New(d.store, d.processor, d.client, d.tables.Payments,
		idempotent.WithOutcomeHook(d.hook("payments")), idempotent.WithClock(later))
	a, err := d.payWith(ctx, restarted, ev)
	if err != nil {
		return err
	}
	tookOver := slices.ContainsFunc(d.outcomes(), func(e idempotent.Event) bool { return e.TookOver && e.Outcome == idempotent.OutcomeExecuted })
	rows, err := d.ledgerRows(ctx, a.payment.PaymentID)
	if err != nil {
		return err
	}
	d.line("retry, clock moved 1 minute on", a.String()+": took over",
		a.status == 201 && !a.replayed && tookOver && rows == 1 && d.processor.Calls() == calls && d.processor.Charges() == charges+1)
	d.detail("why: the charge step was answered from the record: no processor call, charged once;")
	d.detail("the row committed with the completion: 1 ledger row. The demo does not wait: this engine's")
	d.detail("clock is 1 minute ahead (idempotent.WithClock), past the dead owner's lease")
	return nil
}

// gatedProcessor holds each charge, once made, until released.
type gatedProcessor struct {
	payments.Processor
	charged chan struct{}
	release chan struct{}
}

func (g *gatedProcessor) Charge(ctx context.Context, key string, req payments.ChargeRequest) (payments.Charge, error) {
	c, err := g.Processor.Charge(ctx, key, req)
	g.charged <- struct{}{}
	<-g.release
	return c, err
}

func (d *demo) staleOwner(ctx context.Context) error {
	ev := withKey(sample(samples.PaymentNew), freshKey())
	charges := d.processor.Charges()
	rowsBefore, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	gate := &gatedProcessor{Processor: d.processor, charged: make(chan struct{}), release: make(chan struct{})}
	stale := payments.New(d.store, gate, d.client, d.tables.Payments, idempotent.WithOutcomeHook(d.hook("payments")))
	owner := payments.New(d.store, gate, d.client, d.tables.Payments, idempotent.WithOutcomeHook(d.hook("payments")), idempotent.WithClock(later))
	type result struct {
		a   answer
		err error
	}
	run := func(h any) chan result {
		out := make(chan result, 1)
		go func() {
			a, err := d.payWith(ctx, h, ev)
			out <- result{a, err}
		}()
		return out
	}
	staleDone := run(stale)
	<-gate.charged // the slow owner charged; then its lease lapses
	ownerDone := run(owner)
	<-gate.charged             // the new owner took over: the processor answers its key with the same charge
	gate.release <- struct{}{} // the stale owner returns, and commits
	s := <-staleDone
	if s.err != nil {
		return s.err
	}
	rowsStale, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	d.line("a slow owner, its lease taken over", s.a.String(), s.a.status == 409 && rowsStale == rowsBefore)
	d.detail("why: its commit was fenced on its lease: its ledger row was discarded with it;")
	d.detail("a fenced writer: its late commit fails the lease check (lease_lost)")
	gate.release <- struct{}{}
	o := <-ownerDone
	if o.err != nil {
		return o.err
	}
	rows, err := d.ledgerRows(ctx, o.a.payment.PaymentID)
	if err != nil {
		return err
	}
	d.line("the new owner", o.a.String(), o.a.status == 201 && rows == 1 && d.processor.Charges() == charges+1)
	d.detail("why: its row committed with its completion: 1 row, the new owner's; charged once")
	return nil
}

// outOfStockSKU has one unit; the order asks for two.
const outOfStockSKU = "SKU-GOLD-PEN"

func (d *demo) outOfStock(ctx context.Context) error {
	if err := d.restock(ctx, outOfStockSKU, 1); err != nil {
		return err
	}
	const id = "9d2c7e41-6b3a-4f5e-8c1d-2a3b4c5d6e7f"
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, EventSource: "aws:sqs",
		Body: fmt.Sprintf(`{"orderId":"order-1099","sku":%q,"quantity":2}`, outOfStockSKU)}}}
	resp, err := d.order(ctx, ev)
	if err != nil {
		return err
	}
	d.mu.Lock()
	out := d.byMsg[id]
	d.mu.Unlock()
	record, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.tables.Idempotency, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: out.RecordID}}})
	if err != nil {
		return err
	}
	items, err := localddb.Scan[orders.InventoryItem](ctx, d.client, d.tables.Inventory)
	if err != nil {
		return err
	}
	var item orders.InventoryItem
	for _, it := range items {
		if it.SKU == outOfStockSKU {
			item = it
		}
	}
	failed := len(resp.BatchItemFailures) == 1 && resp.BatchItemFailures[0].ItemIdentifier == id
	d.line(outOfStockSKU+" ×2, 1 in stock", "batchItemFailures: "+short(id),
		failed && errors.Is(out.Err, idempotent.ErrTxAborted) && len(record.Item) == 0 && item.Stock == 1 && item.Reserved == 0)
	d.detail("why: stock >= :qty failed: nothing committed (stock %d, reserved %d), record released", item.Stock, item.Reserved)
	d.detail("SQS redelivers it; after maxReceiveCount it goes to the dead-letter queue")
	return nil
}

// restock adds units to a SKU's stock, as a warehouse feed would.
func (d *demo) restock(ctx context.Context, sku string, units int64) error {
	_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &d.tables.Inventory,
		Key:                       map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: sku}},
		UpdateExpression:          aws.String("ADD #stock :units"),
		ExpressionAttributeNames:  map[string]string{"#stock": orders.StockAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":units": &types.AttributeValueMemberN{Value: strconv.FormatInt(units, 10)}},
	})
	if err != nil {
		return fmt.Errorf("demo: restock %s: %w", sku, err)
	}
	return nil
}
