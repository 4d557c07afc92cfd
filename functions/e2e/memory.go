package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
)

// MemoryTables stands in for the payments and inventory tables in process:
// it implements payments.Ledger, orders.Inventory and State, understanding
// exactly the writes the two functions make without a transaction (a PutItem
// of a ledger item, an UpdateItem that reserves stock).
// The zero value is ready to use; it is safe for concurrent use.
type MemoryTables struct {
	// Delay, when positive, is how long every write takes, so duplicates
	// sent at once meet while the first is still running.
	Delay time.Duration
	// Fail, when set, is called before every write with its operation name
	// (PutItem or UpdateItem); a non-nil error fails the write, which then
	// changes nothing.
	Fail func(op string) error
	// FailAfter, when set, is called after every write that was applied; a
	// non-nil error is returned in place of the write's answer, as when a
	// write lands but its caller sees a timeout or an exhausted retry.
	FailAfter func(op string) error

	mu        sync.Mutex
	ledger    []payments.LedgerItem
	inventory map[string]int64 // reserved, by SKU
	stock     map[string]int64 // by SKU
	tokens    map[string]bool  // reservation tokens applied
}

var (
	_ payments.Ledger  = (*MemoryTables)(nil)
	_ orders.Inventory = (*MemoryTables)(nil)
	_ State            = (*MemoryTables)(nil)
)

// after reports an applied write's outcome as FailAfter decides. It runs
// under m.mu; FailAfter must not call back into m.
func (m *MemoryTables) after(op string) error {
	if m.FailAfter != nil {
		return m.FailAfter(op)
	}
	return nil
}

func (m *MemoryTables) before(ctx context.Context, op string) error {
	if m.Delay > 0 {
		t := time.NewTimer(m.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if m.Fail != nil {
		return m.Fail(op)
	}
	return nil
}

// PutItem implements payments.Ledger: it understands the payments
// function's write, conditioned on the payment ID being free or holding the
// same charge (which it leaves as it is).
func (m *MemoryTables) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := m.before(ctx, "PutItem"); err != nil {
		return nil, err
	}
	var item payments.LedgerItem
	if err := attributevalue.UnmarshalMap(in.Item, &item); err != nil {
		return nil, fmt.Errorf("e2e: ledger item: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, old := range m.ledger {
		if old.PaymentID != item.PaymentID {
			continue
		}
		if old.ChargeID == item.ChargeID {
			return &dynamodb.PutItemOutput{}, m.after("PutItem")
		}
		ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		if in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			av, err := attributevalue.MarshalMap(old)
			if err != nil {
				return nil, err
			}
			ccf.Item = av
		}
		return nil, ccf
	}
	m.ledger = append(m.ledger, item)
	return &dynamodb.PutItemOutput{}, m.after("PutItem")
}

// UpdateItem implements orders.Inventory: it understands the orders
// function's reservation without a transaction (take :qty from stock, add it
// to reserved, add the order's token), conditioned on the stock covering
// :qty and the token not having been applied yet.
func (m *MemoryTables) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := m.before(ctx, "UpdateItem"); err != nil {
		return nil, err
	}
	sku, ok := in.Key["sku"].(*types.AttributeValueMemberS)
	qtyAV, okQty := in.ExpressionAttributeValues[":qty"].(*types.AttributeValueMemberN)
	tokenAV, okToken := in.ExpressionAttributeValues[":tokenValue"].(*types.AttributeValueMemberS)
	if !ok || !okQty || !okToken {
		return nil, fmt.Errorf("e2e: MemoryTables understands only the orders function's reservation")
	}
	n, err := strconv.ParseInt(qtyAV.Value, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("e2e: :qty %q: %w", qtyAV.Value, err)
	}
	token := tokenAV.Value
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if m.tokens[token] || m.stock[sku.Value] < n {
		ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		if m.tokens[token] && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = map[string]types.AttributeValue{orders.ReservationsAttr: &types.AttributeValueMemberSS{Value: []string{token}}}
		}
		return nil, ccf
	}
	m.tokens[token] = true
	m.stock[sku.Value] -= n
	m.inventory[sku.Value] += n
	return &dynamodb.UpdateItemOutput{}, m.after("UpdateItem")
}

func (m *MemoryTables) init() {
	if m.inventory == nil {
		m.inventory = make(map[string]int64)
		m.stock = make(map[string]int64)
		m.tokens = make(map[string]bool)
	}
}

// Restock implements State.
func (m *MemoryTables) Restock(_ context.Context, sku string, units int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	m.stock[sku] += units
	if _, ok := m.inventory[sku]; !ok {
		m.inventory[sku] = 0
	}
	return nil
}

// Ledger implements State.
func (m *MemoryTables) Ledger(context.Context) ([]payments.LedgerItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]payments.LedgerItem(nil), m.ledger...), nil
}

// Inventory implements State.
func (m *MemoryTables) Inventory(context.Context) ([]orders.InventoryItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]orders.InventoryItem, 0, len(m.inventory))
	for sku, n := range m.inventory {
		out = append(out, orders.InventoryItem{SKU: sku, Stock: m.stock[sku], Reserved: n})
	}
	return out, nil
}
