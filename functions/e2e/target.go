package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/internal/localddb"
)

// Invoker delivers one event, as JSON, to a function and returns the
// function's response JSON. A function error is returned as an error.
type Invoker func(ctx context.Context, event []byte) ([]byte, error)

// State reads what the functions' side effects left behind.
type State interface {
	// Ledger returns every item of the payments table.
	Ledger(ctx context.Context) ([]payments.LedgerItem, error)
	// Inventory returns every item of the inventory table.
	Inventory(ctx context.Context) ([]orders.InventoryItem, error)
	// Restock adds units to a SKU's stock, creating its item if need be.
	Restock(ctx context.Context, sku string, units int64) error
}

// Target is a deployment of the sample functions the suite runs against.
type Target struct {
	// Payments invokes the payments function.
	Payments Invoker
	// Orders invokes the orders function.
	Orders Invoker
	// State reads the payments and inventory tables.
	State State
	// Duplicates is how many identical requests the concurrency scenarios
	// send at once; 16 when zero.
	Duplicates int
	// Queue, when set, puts messages on the orders queue: the suite then also
	// sends orders through it, duplicates included, and waits for the
	// inventory to show each order reserved once.
	Queue QueueSender
	// QueueWait bounds that wait; 90 s when zero.
	QueueWait time.Duration
	// QueueSettle is how long the inventory must then stay unchanged, for
	// late duplicates to show up if they were to reserve twice; none when
	// zero (a LocalQueue has delivered everything when Send returns).
	QueueSettle time.Duration
}

// Timeouts of the deployed functions (infra/stack.go); LocalInvoker gives
// each invocation the same deadline, from which the idempotency lease is
// derived.
const (
	PaymentsTimeout = 10 * time.Second
	OrdersTimeout   = 30 * time.Second
)

// LocalInvoker invokes handler in process through
// lambda.NewHandler(handler).Invoke: the JSON decoding, call and encoding
// lambda.Start performs, with the invocation's context ending after timeout,
// as Lambda's does at the function's timeout. Invocations may run
// concurrently.
func LocalInvoker(handler any, timeout time.Duration) Invoker {
	return func(ctx context.Context, event []byte) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// A Handler per invocation: the bytes Invoke returns alias a buffer
		// that it has already put back into the Handler's pool, for the
		// next invocation to overwrite (lambda.Start reads the buffer before
		// the next invocation; concurrent callers cannot). Building one is
		// a little reflection, nothing more.
		out, err := lambda.NewHandler(handler).Invoke(ctx, event)
		return bytes.Clone(out), err
	}
}

// DynamoState reads the tables of a DynamoDB (local or AWS).
type DynamoState struct {
	// Client reaches the tables.
	Client *dynamodb.Client
	// Tables names them.
	Tables localddb.Tables
}

var _ State = DynamoState{}

// Ledger implements State.
func (s DynamoState) Ledger(ctx context.Context) ([]payments.LedgerItem, error) {
	return localddb.Scan[payments.LedgerItem](ctx, s.Client, s.Tables.Payments)
}

// Inventory implements State.
func (s DynamoState) Inventory(ctx context.Context) ([]orders.InventoryItem, error) {
	return localddb.Scan[orders.InventoryItem](ctx, s.Client, s.Tables.Inventory)
}

// Restock implements State: one UpdateItem (ADD stock :units).
func (s DynamoState) Restock(ctx context.Context, sku string, units int64) error {
	_, err := s.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.Tables.Inventory,
		Key:                       map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: sku}},
		UpdateExpression:          aws.String("ADD #stock :units"),
		ExpressionAttributeNames:  map[string]string{"#stock": orders.StockAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":units": &types.AttributeValueMemberN{Value: strconv.FormatInt(units, 10)}},
	})
	if err != nil {
		return fmt.Errorf("e2e: restock %s: %w", sku, err)
	}
	return nil
}
