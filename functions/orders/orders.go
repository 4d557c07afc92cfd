package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
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
	// Stock is the number of units left to reserve. An order reserves only
	// while Stock covers its quantity; an SKU without an item (or without
	// stock) has none.
	Stock int64 `json:"stock" dynamodbav:"stock"`
	// Reserved is the total quantity reserved by processed orders.
	Reserved int64 `json:"reserved" dynamodbav:"reserved"`
}

// The inventory item's attributes the function writes.
const (
	// StockAttr is the number of units left to reserve.
	StockAttr = "stock"
	// ReservedAttr is the number of units reserved for the SKU.
	ReservedAttr = "reserved"
	// ReservationsAttr is the set of tokens of the reservations applied, one
	// per order, so a repeated write applies once. Only a run without a
	// transaction (over a store other than dynamostore) writes it.
	ReservationsAttr = "reservations"
)

// ErrOutOfStock: the SKU's stock does not cover the order's quantity, so
// nothing was reserved. Over a store without transactions the function
// returns it; in a transaction, DynamoDB's cancellation says the same (a
// *dynamostore.TxCanceledError naming the inventory item and
// ConditionalCheckFailed).
var ErrOutOfStock = errors.New("orders: out of stock")

// The reservation: one conditional update of the SKU's item. In the
// completion's transaction it applies once while the record lives; without a
// transaction it also adds the order's token, and its condition refuses a
// token already applied.
const (
	reserveUpdate         = "SET #stock = #stock - :qty ADD #reserved :qty"
	reserveCondition      = "#stock >= :qty"
	reserveUpdateToken    = "SET #stock = #stock - :qty ADD #reserved :qty, #reservations :token"
	reserveConditionToken = "#stock >= :qty AND (attribute_not_exists(#reservations) OR NOT contains(#reservations, :tokenValue))"
)

var (
	reserveNames      = map[string]string{"#stock": StockAttr, "#reserved": ReservedAttr}
	reserveNamesToken = map[string]string{"#stock": StockAttr, "#reserved": ReservedAttr, "#reservations": ReservationsAttr}
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
		sqsbatch.WithParallelism(Parallelism))
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

// reserve takes the order's quantity from its SKU's stock and adds it to
// the SKU's reserved count, with one update conditioned on the stock
// covering the quantity. Over a dynamostore.Store the update joins the
// completion's transaction (dynamostore.Transaction): the reservation and
// the record's completion commit together or not at all, so it applies once
// while the record lives, and a run that loses its lease or dies reserves
// nothing. A stock that does not cover the quantity cancels the transaction:
// nothing commits, the key is released, and the message is a batch item
// failure (see the package's doc).
//
// Over a store without transactions (the memory store of tests) the update is
// an UpdateItem of its own, which also adds a reservation token, the order's
// downstream key, the same for every run of the order: a write repeated by an
// SDK retry, a redelivery or a takeover finds its token and reserves nothing
// more. (A sample's shortcut: that set grows by one token per order.)
func (r *reserver) reserve(ctx context.Context, o Order) error {
	key := map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: o.SKU}}
	qty := &types.AttributeValueMemberN{Value: strconv.Itoa(o.Quantity)}
	tx, err := dynamostore.Transaction(ctx)
	switch {
	case err == nil:
		err := tx.Add(types.TransactWriteItem{Update: &types.Update{
			TableName:                           &r.table,
			Key:                                 key,
			UpdateExpression:                    aws.String(reserveUpdate),
			ConditionExpression:                 aws.String(reserveCondition),
			ExpressionAttributeNames:            reserveNames,
			ExpressionAttributeValues:           map[string]types.AttributeValue{":qty": qty},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
		if err != nil {
			return fmt.Errorf("orders: reserve stock: %w", err)
		}
	case errors.Is(err, idempotent.ErrNoTx):
		if err := r.reserveAlone(ctx, key, qty); err != nil {
			return err
		}
	default:
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

// reserveAlone is the reservation as an UpdateItem of its own, with the
// order's token: a failed condition whose item holds the token was this
// order's earlier write; otherwise the stock did not cover the quantity.
func (r *reserver) reserveAlone(ctx context.Context, key map[string]types.AttributeValue, qty types.AttributeValue) error {
	token := reservationToken(ctx)
	_, err := r.inventory.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &r.table,
		Key:                      key,
		UpdateExpression:         aws.String(reserveUpdateToken),
		ConditionExpression:      aws.String(reserveConditionToken),
		ExpressionAttributeNames: reserveNamesToken,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":qty":        qty,
			":token":      &types.AttributeValueMemberSS{Value: []string{token}},
			":tokenValue": &types.AttributeValueMemberS{Value: token},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		if tokens, ok := failed.Item[ReservationsAttr].(*types.AttributeValueMemberSS); ok && slices.Contains(tokens.Value, token) {
			return nil // applied by an earlier write of this order
		}
		return ErrOutOfStock
	case err != nil:
		return fmt.Errorf("orders: reserve stock: %w", err)
	}
	return nil
}
