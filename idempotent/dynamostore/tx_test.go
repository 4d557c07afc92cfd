package dynamostore_test

import (
	"context"
	"strconv"
	"testing"

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
