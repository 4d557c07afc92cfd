package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/idempotent/storage"
)

const (
	// Prefix is the idempotency key prefix of the orders function: fixed, so
	// that renaming or redeploying the function keeps its records valid.
	Prefix = "orders"
	// Expiry is how long a processed order is remembered: one day, longer
	// than a message can circulate between the queue and its dead-letter
	// queue's redrive in normal operation.
	Expiry = 24 * time.Hour
	// Parallelism is how many orders of a batch are processed at once
	// (messages with the same orderId never run at the same time).
	Parallelism = 4
	// MaxQuantity is the largest quantity one order may reserve.
	MaxQuantity = 1000
	// MaxIDLength bounds orderId and sku, in bytes.
	MaxIDLength = 128
)

// Inventory is the DynamoDB call the function's side effect makes.
// *dynamodb.Client satisfies it; tests pass fakes that fail or stall.
type Inventory interface {
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ Inventory = (*dynamodb.Client)(nil)

// Order is an SQS message body. Fields the function does not know are
// ignored (a tolerant reader: producers may add fields), unlike the payments
// API's strict body.
type Order struct {
	// OrderID is the idempotency key: an order reserves stock once, however
	// often and under however many message IDs it is delivered.
	OrderID string `json:"orderId"`
	// SKU is the inventory item to reserve.
	SKU string `json:"sku"`
	// Quantity is how many to reserve: an integer from 1 to MaxQuantity.
	Quantity int `json:"quantity"`
}

// Validate reports why an order cannot be processed; sqsbatch calls it after
// decoding and reports the message as a batch item failure.
func (o Order) Validate() error {
	var errs []error
	if err := checkID(o.OrderID); err != nil {
		errs = append(errs, fmt.Errorf("orderId %w", err))
	}
	if err := checkID(o.SKU); err != nil {
		errs = append(errs, fmt.Errorf("sku %w", err))
	}
	if o.Quantity < 1 || o.Quantity > MaxQuantity {
		errs = append(errs, fmt.Errorf("quantity must be an integer from 1 to %d", MaxQuantity))
	}
	return errors.Join(errs...)
}

func checkID(s string) error {
	switch {
	case s == "":
		return errors.New("is required")
	case len(s) > MaxIDLength:
		return fmt.Errorf("must be at most %d bytes long", MaxIDLength)
	case strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("must not contain control characters")
	}
	return nil
}

// InventoryItem is an item of the inventory table (partition key sku).
type InventoryItem struct {
	// SKU is the partition key.
	SKU string `json:"sku" dynamodbav:"sku"`
	// Reserved is the total quantity reserved by processed orders.
	Reserved int64 `json:"reserved" dynamodbav:"reserved"`
}

// The inventory item's attributes the function writes.
const (
	// ReservedAttr is the number of units reserved for the SKU.
	ReservedAttr = "reserved"
	// ReservationsAttr is the set of tokens of the reservations applied, one
	// per order, so a repeated write applies once.
	ReservationsAttr = "reservations"
)

// reservationToken is "r" and the order's downstream key, the same for
// every run of the order; a run without idempotency (IDEMKIT_DISABLED) gets a
// fresh random one.
func reservationToken(ctx context.Context) string {
	if key := idempotent.DownstreamKey(ctx); key != "" {
		return "r" + key
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return "r" + hex.EncodeToString(b[:])
}

// New returns the orders Lambda handler: an SQS batch consumer, idempotent
// per orderId with sqsbatch.Wrap over store, that reserves stock in the
// inventory table through inventory and answers with a partial batch
// response, Parallelism orders at a time. opts configure the engine
// (idempotent.New) after the function's own settings (prefix Prefix, expiry
// Expiry), so they can override them and add, for example,
// idempotent.WithOutcomeHook(...).
func New(store storage.Store, inventory Inventory, table string, opts ...idempotent.Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	e := idempotent.New(store, append([]idempotent.Option{idempotent.WithPrefix(Prefix), idempotent.WithExpiry(Expiry)}, opts...)...)
	return sqsbatch.Wrap(e, newReserver(inventory, table).reserve,
		sqsbatch.WithKey(func(o Order) (string, error) { return o.OrderID, nil }),
		sqsbatch.WithParallelism[Order](Parallelism))
}

// reserver is the function's logic, before idempotency.
type reserver struct {
	inventory Inventory
	table     string
}

func newReserver(inventory Inventory, table string) *reserver {
	if inventory == nil {
		panic("orders: New: nil inventory")
	}
	if table == "" {
		panic("orders: New: empty table name")
	}
	return &reserver{inventory: inventory, table: table}
}

// reserve adds the order's quantity to its SKU's reserved count. ADD alone
// is not idempotent, so the write carries a reservation token, added to the
// item's reservations set in the same update and checked by its condition:
// a write that finds its token has already been applied. The token is the
// order's downstream key (idempotent.DownstreamKey), the same for every run
// of the order, so the reservation applies once whether the write is
// repeated by an SDK retry after a lost response, by the redelivery of a
// message whose write landed but answered an error (its key was released),
// or by a run after a takeover. (A sample's shortcut: the set grows by one
// token per order; a real inventory would keep reservations as items.)
// A failure makes the message a batch item failure and releases its key, so
// SQS redelivers it and it runs again.
func (r *reserver) reserve(ctx context.Context, o Order) error {
	token := reservationToken(ctx)
	update, err := expression.NewBuilder().
		WithUpdate(expression.
			Add(expression.Name(ReservedAttr), expression.Value(o.Quantity)).
			Add(expression.Name(ReservationsAttr), expression.Value(&types.AttributeValueMemberSS{Value: []string{token}}))).
		WithCondition(expression.Or(
			expression.AttributeNotExists(expression.Name(ReservationsAttr)),
			expression.Not(expression.Contains(expression.Name(ReservationsAttr), token)))).
		Build()
	if err != nil {
		return fmt.Errorf("orders: build update: %w", err)
	}
	_, err = r.inventory.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &r.table,
		Key:                       map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: o.SKU}},
		UpdateExpression:          update.Update(),
		ConditionExpression:       update.Condition(),
		ExpressionAttributeNames:  update.Names(),
		ExpressionAttributeValues: update.Values(),
	})
	var applied *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &applied) {
		return fmt.Errorf("orders: reserve stock: %w", err)
	}
	msg, _ := sqsbatch.MessageFromContext(ctx)
	inv, _ := idempotent.FromContext(ctx)
	slog.InfoContext(ctx, "orders: reserved",
		slog.String("message_id", msg.MessageId),
		slog.String("sku", o.SKU),
		slog.Int("quantity", o.Quantity),
		slog.Bool("took_over", inv.TookOver))
	return nil
}
