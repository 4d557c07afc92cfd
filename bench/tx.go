package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
)

// The transactional completion (issue 24), measured on its own tables and
// kept in this file, so that §1 and §8 gain rows with few edits elsewhere:
// a handler that writes one ledger row per new key, either in the
// completion's transaction (dynamostore.Transaction: the claim's PutItem,
// then one TransactWriteItems carrying the completion and the row) or with
// a PutItem of its own (the claim, the handler's PutItem, the completion's
// UpdateItem). §1 counts the calls of each; §8 sums the capacity DynamoDB
// reports for them (ReturnConsumedCapacity=TOTAL, TransactWriteItems
// included), where a transactional write costs twice a plain one.

// txCapacity is §8's figure for one way of writing the row: write capacity
// units per invocation, in total and by operation.
type txCapacity struct {
	Scenario string
	N        int
	Units    float64            // per invocation
	ByOp     map[string]float64 // per invocation
	Problem  string
}

// txResult is what runTx measured.
type txResult struct {
	Calls    []callsResult
	Capacity []txCapacity
	Err      string
}

// txLedgerItem is the bench handler's ledger row.
type txLedgerItem struct {
	ID       string `dynamodbav:"id"`
	Customer string `dynamodbav:"customerId"`
	Amount   int64  `dynamodbav:"amount"`
	Currency string `dynamodbav:"currency"`
}

const txLedgerCondition = "attribute_not_exists(#id)"

// runTx measures the two ways over reps new keys each, on its own
// idempotency and ledger tables. client counts calls (newClient).
func runTx(ctx context.Context, client *dynamodb.Client, tmpl paymentEvent, reps int) txResult {
	var r txResult
	idem, err := createTable(ctx, client, "tx")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer deleteTable(client, idem)
	ledger := "idembench-ledger-" + randomHex(4)
	if err := localddb.CreateTable(ctx, client, localddb.Table{Name: ledger, PartitionKey: "id"}); err != nil {
		r.Err = err.Error()
		return r
	}
	defer deleteTable(client, ledger)

	log := &txCapacityLog{ops: map[string]float64{}}
	measured := dynamodb.New(client.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, txConsumedCapacity(log))
	})
	store := dynamostore.New(measured, idem)
	opts := []idempotent.Option{idempotent.WithPrefix("tx"), idempotent.WithExpiry(time.Hour), idempotent.WithLogger(slog.New(slog.DiscardHandler))}
	row := func(e paymentEvent) (map[string]types.AttributeValue, error) {
		return attributevalue.MarshalMap(txLedgerItem{ID: "pay-" + e.IdempotencyKey, Customer: e.CustomerID, Amount: e.Amount, Currency: e.Currency})
	}
	names := map[string]string{"#id": "id"}
	inTx := func(ctx context.Context, e paymentEvent) (paymentResult, error) {
		item, err := row(e)
		if err != nil {
			return paymentResult{}, err
		}
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return paymentResult{}, err
		}
		err = tx.Add(types.TransactWriteItem{Put: &types.Put{TableName: &ledger, Item: item,
			ConditionExpression: aws.String(txLedgerCondition), ExpressionAttributeNames: names}})
		return paymentResult{PaymentID: "pay-" + e.IdempotencyKey, Status: "captured", Amount: e.Amount}, err
	}
	alone := func(ctx context.Context, e paymentEvent) (paymentResult, error) {
		item, err := row(e)
		if err != nil {
			return paymentResult{}, err
		}
		_, err = measured.PutItem(ctx, &dynamodb.PutItemInput{TableName: &ledger, Item: item,
			ConditionExpression: aws.String(txLedgerCondition), ExpressionAttributeNames: names})
		return paymentResult{PaymentID: "pay-" + e.IdempotencyKey, Status: "captured", Amount: e.Amount}, err
	}
	for _, sc := range []struct {
		name   string
		target int
		fn     func(context.Context, paymentEvent) (paymentResult, error)
	}{
		{"new key, one handler write in the completion transaction", 2, inTx},
		{"new key, one handler write of its own (no transaction)", 3, alone},
	} {
		h := idempotent.Wrap(idempotent.New(store, opts...), sc.fn, idempotent.WithKey(eventKey))
		res := callsResult{Scenario: sc.name, Target: sc.target, Outcome: "executed"}
		capRes := txCapacity{Scenario: sc.name, N: reps}
		log.take()
		for i := range reps {
			c := &calls{names: []string{}}
			ictx, cancel := context.WithTimeout(withCalls(ctx, c), 30*time.Second)
			ev := tmpl
			ev.IdempotencyKey = "tx-" + randomHex(8)
			_, err := h(ictx, ev)
			cancel()
			if err != nil && res.Problem == "" {
				res.Problem = err.Error()
			}
			res.Calls = append(res.Calls, int(c.ops.Load()))
			res.Attempts = append(res.Attempts, int(c.attempts.Load()))
			if i == 0 {
				res.Ops = c.names
			}
		}
		ops, missing := log.take()
		capRes.ByOp = map[string]float64{}
		for op, u := range ops {
			capRes.ByOp[op] = u / float64(reps)
			capRes.Units += u / float64(reps)
		}
		if missing > 0 {
			capRes.Problem = fmt.Sprintf("%d calls reported no consumed capacity", missing)
		}
		r.Calls = append(r.Calls, res)
		r.Capacity = append(r.Capacity, capRes)
	}
	return r
}

// txCapacityLog sums the write units the measured client's calls report.
type txCapacityLog struct {
	mu      sync.Mutex
	ops     map[string]float64
	missing int // calls that reported nothing
}

func (l *txCapacityLog) add(op string, units []types.ConsumedCapacity) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(units) == 0 {
		l.missing++
		return
	}
	for _, u := range units {
		l.ops[op] += aws.ToFloat64(u.CapacityUnits)
	}
}

func (l *txCapacityLog) take() (map[string]float64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops, missing := l.ops, l.missing
	l.ops, l.missing = map[string]float64{}, 0
	return ops, missing
}

// txConsumedCapacity sets ReturnConsumedCapacity=TOTAL on the writes of the
// transaction scenarios (on a copy of the input) and records what their
// responses report; capacity.go's middleware does the same for the item
// operations, not for TransactWriteItems.
func txConsumedCapacity(log *txCapacityLog) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("idembench/tx-consumed-capacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				total := types.ReturnConsumedCapacityTotal
				op := ""
				switch v := in.Parameters.(type) {
				case *dynamodb.PutItemInput:
					c := *v
					c.ReturnConsumedCapacity, op = total, "PutItem"
					in.Parameters = &c
				case *dynamodb.UpdateItemInput:
					c := *v
					c.ReturnConsumedCapacity, op = total, "UpdateItem"
					in.Parameters = &c
				case *dynamodb.TransactWriteItemsInput:
					c := *v
					c.ReturnConsumedCapacity, op = total, "TransactWriteItems"
					in.Parameters = &c
				}
				out, md, err := next.HandleInitialize(ctx, in)
				if op == "" {
					return out, md, err
				}
				var units []types.ConsumedCapacity
				switch o := out.Result.(type) {
				case *dynamodb.PutItemOutput:
					if o.ConsumedCapacity != nil {
						units = []types.ConsumedCapacity{*o.ConsumedCapacity}
					}
				case *dynamodb.UpdateItemOutput:
					if o.ConsumedCapacity != nil {
						units = []types.ConsumedCapacity{*o.ConsumedCapacity}
					}
				case *dynamodb.TransactWriteItemsOutput:
					units = o.ConsumedCapacity
				}
				var ccf *types.ConditionalCheckFailedException
				if err == nil || !errors.As(err, &ccf) {
					log.add(op, units)
				}
				return out, md, err
			}), middleware.After)
	}
}

// writeTx is §8's table of the transaction's cost.
func (rep *report) writeTx(p func(string, ...any)) {
	r := rep.tx
	if r.Err == "" && len(r.Capacity) == 0 {
		return // not run
	}
	p("\n#### With a handler write: in the completion's transaction or not\n\n")
	if r.Err != "" {
		p("Not measured: %s\n", r.Err)
		return
	}
	p("A new key whose handler writes one ~100-byte ledger row (bench/tx.go), measured with\n" +
		"ReturnConsumedCapacity=TOTAL on every call, TransactWriteItems included. DynamoDB bills each item of a\n" +
		"transaction twice (prepare and commit), so the completion and the row cost 2 WCU each in one\n" +
		"TransactWriteItems, against 1 each as separate writes; the transaction saves one call.\n\n")
	p("| scenario | invocations | WCU per invocation | by operation |\n| --- | ---: | ---: | --- |\n")
	for _, c := range r.Capacity {
		var parts []string
		for _, op := range slices.Sorted(maps.Keys(c.ByOp)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", op, c.ByOp[op]))
		}
		by := strings.Join(parts, ", ")
		if c.Problem != "" {
			by += " (" + c.Problem + ")"
		}
		p("| %s | %d | %.2f | %s |\n", c.Scenario, c.N, c.Units, by)
	}
}
