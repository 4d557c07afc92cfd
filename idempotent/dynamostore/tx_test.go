package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// Transactions on DynamoDB Local, through idempotent.Wrap: a payments
// ledger row (Payments table, key paymentId) and a stock counter
// (Inventory table, key sku) commit with the completion.

type order struct {
	ID  string `json:"id"`
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

func orderKey(o order) (string, error) { return o.ID, nil }

// txBench is a store and the business tables of one test.
type txBench struct {
	client *dynamodb.Client
	tables localddb.Tables
	store  *dynamostore.Store
	calls  *callCounter
}

func newTxBench(t *testing.T, optFns ...func(*dynamodb.Options)) *txBench {
	t.Helper()
	calls := &callCounter{}
	client := localddbtest.Client(t, append([]func(*dynamodb.Options){withMiddleware(calls.apiOption)}, optFns...)...)
	tables := localddbtest.Tables(t, client)
	b := &txBench{client: client, tables: tables, store: dynamostore.New(client, tables.Idempotency), calls: calls}
	return b
}

// stock sets the stock of sku.
func (b *txBench) setStock(t *testing.T, sku string, n int) {
	t.Helper()
	_, err := b.client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &b.tables.Inventory, Item: map[string]types.AttributeValue{
		"sku": &types.AttributeValueMemberS{Value: sku}, "stock": &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
	}})
	require.NoError(t, err)
}

func (b *txBench) stock(t *testing.T, sku string) int {
	t.Helper()
	out, err := b.client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &b.tables.Inventory, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: sku}}})
	require.NoError(t, err)
	n, ok := out.Item["stock"].(*types.AttributeValueMemberN)
	require.True(t, ok, "stock of %s: %v", sku, out.Item)
	v, err := strconv.Atoi(n.Value)
	require.NoError(t, err)
	return v
}

// ledger returns the ledger row paymentId, nil if there is none.
func (b *txBench) ledger(t *testing.T, paymentID string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &b.tables.Payments, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: paymentID}}})
	require.NoError(t, err)
	return out.Item
}

// ledgerPut is a Put of a ledger row that must not exist yet.
func (b *txBench) ledgerPut(paymentID, by string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName: &b.tables.Payments,
		Item: map[string]types.AttributeValue{
			"paymentId": &types.AttributeValueMemberS{Value: paymentID},
			"by":        &types.AttributeValueMemberS{Value: by},
		},
		ConditionExpression: aws.String("attribute_not_exists(paymentId)"),
	}}
}

// reserve takes qty of sku, on condition that the stock stays >= 0.
func (b *txBench) reserve(sku string, qty int) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                           &b.tables.Inventory,
		Key:                                 map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: sku}},
		UpdateExpression:                    aws.String("ADD stock :minus"),
		ConditionExpression:                 aws.String("stock >= :qty"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":minus": &types.AttributeValueMemberN{Value: strconv.Itoa(-qty)}, ":qty": &types.AttributeValueMemberN{Value: strconv.Itoa(qty)}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// orderHandler reserves the stock and writes the ledger row in the
// completion's transaction.
func (b *txBench) orderHandler(runs *int) func(context.Context, order) (string, error) {
	return func(ctx context.Context, o order) (string, error) {
		*runs++
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return "", err
		}
		if err := tx.Add(b.reserve(o.SKU, o.Qty), b.ledgerPut("pay-"+o.ID, "run "+strconv.Itoa(*runs))); err != nil {
			return "", err
		}
		return "reserved " + o.ID, nil
	}
}

func TestTransactionCommitsWithTheCompletion(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	b.setStock(t, "sku-1", 5)
	runs := 0
	h := idempotent.Wrap(idempotent.New(b.store), b.orderHandler(&runs), idempotent.WithKey(orderKey))
	b.calls.take()

	out, err := h(t.Context(), order{ID: "o1", SKU: "sku-1", Qty: 2})
	require.NoError(t, err)
	assert.Equal(t, "reserved o1", out)
	assert.Equal(t, []string{"PutItem", "TransactWriteItems"}, b.calls.take(), "a new key with handler writes: the claim and one transaction")

	for range 2 {
		out, err := h(t.Context(), order{ID: "o1", SKU: "sku-1", Qty: 2})
		require.NoError(t, err)
		assert.Equal(t, "reserved o1", out)
	}
	assert.Equal(t, []string{"PutItem", "PutItem"}, b.calls.take(), "duplicates replay from the claim")
	assert.Equal(t, 1, runs)
	assert.Equal(t, 3, b.stock(t, "sku-1"), "the stock was reserved once")
	assert.NotNil(t, b.ledger(t, "pay-o1"))
}

// ledgerWrites is storetest.TxWrites on the Payments table: a write is a
// ledger row named by its paymentId; a failing one is a ConditionCheck that
// its row exists, which it does not.
type ledgerWrites struct {
	client *dynamodb.Client
	table  string
}

func (w ledgerWrites) Add(_ context.Context, tx storage.Tx, name string, fail bool) error {
	key := map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: name}}
	if fail {
		return tx.(*dynamostore.Tx).Add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: &w.table, Key: key, ConditionExpression: aws.String("attribute_exists(paymentId)"),
		}})
	}
	return tx.(*dynamostore.Tx).Add(types.TransactWriteItem{Put: &types.Put{
		TableName: &w.table, Item: key, ConditionExpression: aws.String("attribute_not_exists(paymentId)"),
	}})
}

func (w ledgerWrites) Committed(ctx context.Context, name string) (bool, error) {
	out, err := w.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &w.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: name}}})
	if err != nil {
		return false, err
	}
	return out.Item != nil, nil
}

func TestTxConformance(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newLocalStore(t, client, l)
			tables := localddbtest.Tables(t, client)
			storetest.RunTx(t, store, ledgerWrites{client: client, table: tables.Payments})
		})
	}
}

// events collects outcome events.
type events struct {
	mu sync.Mutex
	ev []idempotent.Event
}

func (e *events) hook(_ context.Context, ev idempotent.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

func (e *events) last() idempotent.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ev[len(e.ev)-1]
}

func TestTxStaleOwnerCommitsNothingAndGetsNoSuccess(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	b.setStock(t, "sku-1", 10)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var ev events
	eng := idempotent.New(b.store, idempotent.WithClock(clock), idempotent.WithMaxLease(5*time.Second), idempotent.WithOutcomeHook(ev.hook))
	inStale, resume := make(chan struct{}), make(chan struct{})
	h := idempotent.Wrap(eng, func(ctx context.Context, o order) (string, error) {
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return "", err
		}
		if err := tx.Add(b.reserve(o.SKU, o.Qty), b.ledgerPut("pay-o1", o.ID)); err != nil {
			return "", err
		}
		if o.ID == "stale" {
			close(inStale)
			<-resume // the stale owner overruns its lease here
		}
		return "by " + o.ID, nil
	}, idempotent.WithKey(func(order) (string, error) { return "o1", nil }))

	var staleErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, staleErr = h(context.Background(), order{ID: "stale", SKU: "sku-1", Qty: 3})
	}()
	<-inStale
	offset.Store(int64(time.Minute)) // the stale owner's lease lapsed
	out, err := h(t.Context(), order{ID: "new", SKU: "sku-1", Qty: 3})
	require.NoError(t, err)
	assert.Equal(t, "by new", out)
	assert.True(t, ev.last().TookOver)
	close(resume)
	<-done

	require.ErrorIs(t, staleErr, idempotent.ErrInProgress, "the stale caller gets what a retry gets, not a success")
	require.ErrorIs(t, staleErr, storage.ErrLeaseLost)
	assert.Equal(t, idempotent.OutcomeLeaseLost, ev.last().Outcome)
	assert.Equal(t, 7, b.stock(t, "sku-1"), "only the new owner's reservation committed")
	assert.Equal(t, "new", b.ledger(t, "pay-o1")["by"].(*types.AttributeValueMemberS).Value)

	out, err = h(t.Context(), order{ID: "stale", SKU: "sku-1", Qty: 3})
	require.NoError(t, err)
	assert.Equal(t, "by new", out, "the stale caller's retry gets the new owner's replay")
}

func TestTxFailedHandlerConditionCommitsNothingAndReleases(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	b.setStock(t, "sku-1", 1)
	var ev events
	runs := 0
	h := idempotent.Wrap(idempotent.New(b.store, idempotent.WithOutcomeHook(ev.hook)), b.orderHandler(&runs), idempotent.WithKey(orderKey))
	b.calls.take()

	_, err := h(t.Context(), order{ID: "o1", SKU: "sku-1", Qty: 2}) // stock would go negative
	require.ErrorIs(t, err, idempotent.ErrTxAborted)
	var cancelled *dynamostore.TxCanceledError
	require.ErrorAs(t, err, &cancelled)
	require.Len(t, cancelled.Reasons, 1, "%v", err)
	r := cancelled.Reasons[0]
	assert.Equal(t, 0, r.Index, "the reservation, the handler's first item")
	assert.Equal(t, "ConditionalCheckFailed", r.Code)
	assert.Equal(t, b.tables.Inventory, r.Table)
	assert.Equal(t, map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: "sku-1"}}, r.Key)
	assert.Equal(t, &types.AttributeValueMemberN{Value: "1"}, r.Item["stock"], "the item as it stood (ALL_OLD)")
	assert.ErrorContains(t, err, `item 0 (table `+b.tables.Inventory+`, key {sku="sku-1"}): ConditionalCheckFailed`)
	var tce *types.TransactionCanceledException
	assert.ErrorAs(t, err, &tce, "the SDK's error is kept")
	assert.Equal(t, idempotent.OutcomeHandlerError, ev.last().Outcome)
	assert.Equal(t, []string{"PutItem", "TransactWriteItems", "DeleteItem"}, b.calls.take(), "claim, the canceled transaction, release")
	assert.Equal(t, 1, b.stock(t, "sku-1"))
	assert.Nil(t, b.ledger(t, "pay-o1"), "nothing committed")

	b.setStock(t, "sku-1", 5)
	out, err := h(t.Context(), order{ID: "o1", SKU: "sku-1", Qty: 2})
	require.NoError(t, err, "the record was released: the retry runs")
	assert.Equal(t, "reserved o1", out)
	assert.Equal(t, 2, runs)
	assert.Equal(t, 3, b.stock(t, "sku-1"))
}

func TestTxRetriedAfterALostResponseAppliesOnce(t *testing.T) {
	t.Parallel()
	loser := &responseLoser{}
	b := newTxBench(t, withMiddleware(loser.apiOption), quickRetries)
	b.setStock(t, "acct-1", 100)
	runs := 0
	h := idempotent.Wrap(idempotent.New(b.store), func(ctx context.Context, o order) (string, error) {
		runs++
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return "", err
		}
		return "credited", tx.Add(types.TransactWriteItem{Update: &types.Update{
			TableName:                 &b.tables.Inventory,
			Key:                       map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: "acct-1"}},
			UpdateExpression:          aws.String("ADD stock :ten"), // not idempotent by itself
			ExpressionAttributeValues: map[string]types.AttributeValue{":ten": &types.AttributeValueMemberN{Value: "10"}},
		}})
	}, idempotent.WithKey(orderKey))
	b.calls.take()

	loser.arm("TransactWriteItems")
	out, err := h(t.Context(), order{ID: "o1"})
	require.NoError(t, err, "the completion succeeded")
	assert.Equal(t, "credited", out)
	assert.Equal(t, []string{"PutItem", "TransactWriteItems", "TransactWriteItems"}, b.calls.take(),
		"the first transaction applied and its response was lost; the SDK sent it again")
	assert.Equal(t, 110, b.stock(t, "acct-1"), "ADD :10 applied exactly once")

	out, err = h(t.Context(), order{ID: "o1"})
	require.NoError(t, err)
	assert.Equal(t, "credited", out, "the record completed")
	assert.Equal(t, 1, runs)
}

// Beyond DynamoDB's ten-minute token window a commit sent again is a new
// request; the completion's status condition still refuses it, and the
// record, completed under the caller's lease, says the first one committed.
// Another content makes another token, which stands for that case.
func TestTxCommitAgainAfterTheTokenAppliesOnce(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	b.setStock(t, "acct-1", 100)
	now := time.Now()
	rec := liveRecord(now)
	res, err := b.store.Claim(t.Context(), rec, now)
	require.NoError(t, err)
	require.True(t, res.Claimed)
	stx, err := b.store.BeginTx(t.Context(), rec.ID, rec.Lease)
	require.NoError(t, err)
	tx := stx.(*dynamostore.Tx)
	require.NoError(t, tx.Add(types.TransactWriteItem{Update: &types.Update{
		TableName:                 &b.tables.Inventory,
		Key:                       map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: "acct-1"}},
		UpdateExpression:          aws.String("ADD stock :ten"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":ten": &types.AttributeValueMemberN{Value: "10"}},
	}}))
	done := rec
	done.Status, done.Data, done.LeaseExpiresAt = storage.StatusCompleted, []byte("first"), time.Time{}
	require.NoError(t, tx.Commit(t.Context(), done))
	b.calls.take()
	again := done
	again.Data = []byte("second")
	require.NoError(t, tx.Commit(t.Context(), again), "the caller's own completed record: the first commit applied")
	assert.Equal(t, []string{"TransactWriteItems"}, b.calls.take(), "decided on the item returned with the failure")
	assert.Equal(t, 110, b.stock(t, "acct-1"))
	got := b.mustRecord(t, rec)
	assert.Equal(t, "first", string(got.Data))
}

// mustRecord reads rec's record through a refused claim.
func (b *txBench) mustRecord(t *testing.T, rec storage.Record) *storage.Record {
	t.Helper()
	other := rec
	other.Lease = "someone-else"
	res, err := b.store.Claim(t.Context(), other, time.Now())
	require.NoError(t, err)
	require.False(t, res.Claimed)
	return res.Existing
}

// A handler's writes are refused before any call when they break DynamoDB's
// limits: the handler sees ErrTxLimit at Add.
func TestTxLimitsAreCheckedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	put := func(id string, bytes int) types.TransactWriteItem {
		p := b.ledgerPut(id, "x")
		if bytes > 0 {
			p.Put.Item["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("p", bytes)}
		}
		return p
	}
	puts := func(n, bytes int) []types.TransactWriteItem {
		items := make([]types.TransactWriteItem, n)
		for i := range items {
			items[i] = put("pay-"+strconv.Itoa(i), bytes)
		}
		return items
	}
	for _, tc := range []struct {
		name  string
		items []types.TransactWriteItem
		want  string
	}{
		{"100 items and the record", puts(100, 0), "101 actions"},
		{"two actions on one item", []types.TransactWriteItem{b.reserve("sku-1", 1), b.reserve("sku-1", 2)}, "item 1 and item 0 act on one item"},
		{"a Put and an Update of one item", []types.TransactWriteItem{b.reserve("sku-1", 1), {Put: &types.Put{TableName: &b.tables.Inventory,
			Item: map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: "sku-1"}}}}}, "item 1 and item 0 act on one item"},
		{"more than 4 MB", puts(11, 390<<10), "DynamoDB allows 4194304"},
		{"no action", []types.TransactWriteItem{{}}, "0 actions in one TransactWriteItem"},
		{"two actions in one item", []types.TransactWriteItem{{Put: b.ledgerPut("a", "x").Put, Update: b.reserve("s", 1).Update}}, "2 actions"},
		{"no table", []types.TransactWriteItem{{Delete: &types.Delete{Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}}}}, "no TableName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addErr error
			h := idempotent.Wrap(idempotent.New(b.store), func(ctx context.Context, o order) (string, error) {
				tx, err := dynamostore.Transaction(ctx)
				if err != nil {
					return "", err
				}
				addErr = tx.Add(tc.items...)
				return "", addErr
			}, idempotent.WithKey(orderKey))
			b.calls.take()
			_, err := h(t.Context(), order{ID: tc.name})
			require.ErrorIs(t, err, dynamostore.ErrTxLimit)
			assert.ErrorContains(t, addErr, tc.want)
			assert.NotErrorIs(t, addErr, idempotent.ErrTxAborted, "Add refused the items; nothing was aborted")
			assert.Equal(t, []string{"PutItem", "DeleteItem"}, b.calls.take(), "no transaction was sent")
		})
	}
}

func TestTxAddOnTheRecordsOwnItemIsRefused(t *testing.T) {
	t.Parallel()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			store, table := newLocalStore(t, localddbtest.Client(t), l)
			key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "rec-1"}}
			if l.composite {
				key = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: store.Options().StaticPartitionKey}, "sk": &types.AttributeValueMemberS{Value: "rec-1"}}
			}
			stx, err := store.BeginTx(t.Context(), "rec-1", "lease-1")
			require.NoError(t, err)
			tx := stx.(*dynamostore.Tx)
			err = tx.Add(types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: key, UpdateExpression: aws.String("SET x = :x"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberS{Value: "x"}}}})
			require.ErrorIs(t, err, dynamostore.ErrTxLimit)
			assert.ErrorContains(t, err, "the record's own completion")
			item := map[string]types.AttributeValue{"x": &types.AttributeValueMemberS{Value: "x"}}
			maps.Copy(item, key)
			err = tx.Add(types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: item}})
			require.ErrorIs(t, err, dynamostore.ErrTxLimit, "a Put on the record's key, known from the store's key schema")
			// Another key of the same table is fine.
			require.NoError(t, tx.Add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &table,
				Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "rec-2"}}, ConditionExpression: aws.String("attribute_not_exists(id)")}}))
		})
	}
}

// A response that would push the transaction past 4 MB, when the items
// alone fit, is ErrTooLarge: the engine completes the record without it
// (idempotent.ErrResponseNotStored for duplicates), with the writes.
func TestTxResponsePastTheTransactionLimitIsNotStored(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	var ev events
	random := make([]byte, 225<<10)
	_, _ = rand.Read(random)
	response := base64.StdEncoding.EncodeToString(random) // 300 KB that compression does not shrink below 200 KB
	h := idempotent.Wrap(idempotent.New(b.store, idempotent.WithOutcomeHook(ev.hook)), func(ctx context.Context, o order) (string, error) {
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return "", err
		}
		for i := range 10 {
			p := b.ledgerPut("pay-"+strconv.Itoa(i), "x")
			p.Put.Item["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("p", 395<<10)}
			if err := tx.Add(p); err != nil {
				return "", err
			}
		}
		return response, nil
	}, idempotent.WithKey(orderKey))
	b.calls.take()
	out, err := h(t.Context(), order{ID: "o1"})
	require.NoError(t, err, "the caller keeps its response")
	assert.Equal(t, response, out)
	assert.Equal(t, idempotent.OutcomeNotStored, ev.last().Outcome)
	assert.Equal(t, []string{"PutItem", "TransactWriteItems"}, b.calls.take(), "refused before the call, then committed without the response")
	assert.NotNil(t, b.ledger(t, "pay-9"))
	_, err = h(t.Context(), order{ID: "o1"})
	require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
}

// Steps and the transaction: a step's result is recorded when it finishes;
// the completion carries what the handler added after. A run that fails
// after its step suspends the record; the retry answers the step from the
// record and adds its writes again (the failed run's never committed).
func TestTxWithSteps(t *testing.T) {
	t.Parallel()
	b := newTxBench(t)
	b.setStock(t, "sku-1", 5)
	charges, runs := 0, 0
	h := idempotent.Wrap(idempotent.New(b.store), func(ctx context.Context, o order) (string, error) {
		runs++
		payment, err := idempotent.Step(ctx, "charge", func(ctx context.Context) (string, error) {
			charges++
			return "ch-" + o.ID, nil
		})
		if err != nil {
			return "", err
		}
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return "", err
		}
		if err := tx.Add(b.reserve(o.SKU, o.Qty), b.ledgerPut(payment, "run "+strconv.Itoa(runs))); err != nil {
			return "", err
		}
		if runs == 1 {
			return "", errors.New("the first run fails after adding its writes")
		}
		return payment, nil
	}, idempotent.WithKey(orderKey))
	b.calls.take()

	_, err := h(t.Context(), order{ID: "o1", SKU: "sku-1", Qty: 2})
	require.Error(t, err)
	assert.Equal(t, []string{"PutItem", "UpdateItem", "UpdateItem"}, b.calls.take(), "claim, the step, suspend: no transaction")
	assert.Nil(t, b.ledger(t, "ch-o1"))
	assert.Equal(t, 5, b.stock(t, "sku-1"))

	b.calls.take()
	out, err := h(t.Context(), order{ID: "o1", SKU: "sku-1", Qty: 2})
	require.NoError(t, err)
	assert.Equal(t, "ch-o1", out)
	assert.Equal(t, []string{"PutItem", "PutItem", "TransactWriteItems"}, b.calls.take(),
		"the resumed run: the claim (a second PutItem keeps the steps), the step from the record, one transaction")
	assert.Equal(t, 1, charges, "the step ran once")
	assert.Equal(t, 3, b.stock(t, "sku-1"), "the resumed run's writes committed once")
	assert.Equal(t, "run 2", b.ledger(t, "ch-o1")["by"].(*types.AttributeValueMemberS).Value)

	_, err = h(t.Context(), order{ID: "inside", SKU: "sku-1", Qty: 1})
	require.NoError(t, err)
	var inside error
	h2 := idempotent.Wrap(idempotent.New(b.store), func(ctx context.Context, o order) (string, error) {
		_, err := idempotent.Step(ctx, "s", func(ctx context.Context) (int, error) {
			_, inside = dynamostore.Transaction(ctx)
			return 0, nil
		})
		return "", err
	}, idempotent.WithKey(orderKey))
	_, err = h2(t.Context(), order{ID: "o2"})
	require.NoError(t, err)
	require.ErrorIs(t, inside, idempotent.ErrNoTx, "no transaction inside a step's function")
}

func TestTransactionOutsideARun(t *testing.T) {
	t.Parallel()
	_, err := dynamostore.Transaction(context.Background())
	require.ErrorIs(t, err, idempotent.ErrNoTx)
}
