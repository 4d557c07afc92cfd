package dynamostore

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits on one TransactWriteItems, which Tx.Add and Tx.Commit
// check before any call.
const (
	// MaxTransactActions is the most actions one transaction holds; the
	// record's completion is one of them, so a handler adds at most 99.
	MaxTransactActions = 100
	// MaxTransactBytes is the most bytes of items one transaction holds,
	// the record's completion included.
	MaxTransactBytes = 4 << 20
)

// ErrTxLimit: the handler's items break a rule of DynamoDB's transactions,
// found before any call: an item without exactly one action or without a
// table, more than MaxTransactActions actions, more than MaxTransactBytes,
// or two actions on one item (an item on the record's own key included).
// From Tx.Add, nothing was added; from a commit, it comes with
// storage.ErrTxAborted: nothing committed. A programmer error: split the
// work, or fix the item.
var ErrTxLimit = errors.New("dynamostore: the transaction breaks DynamoDB's limits")

// describe reads what the limits need of a handler item, refusing one
// without exactly one action or without its table, key or item.
func (s *Store) describe(it *types.TransactWriteItem) (itemMeta, error) {
	var (
		m       itemMeta
		actions int
		values  map[string]types.AttributeValue
	)
	if c := it.ConditionCheck; c != nil {
		actions++
		m.table, m.key, values = aws.ToString(c.TableName), c.Key, c.ExpressionAttributeValues
	}
	if u := it.Update; u != nil {
		actions++
		m.table, m.key, values = aws.ToString(u.TableName), u.Key, u.ExpressionAttributeValues
	}
	if d := it.Delete; d != nil {
		actions++
		m.table, m.key, values = aws.ToString(d.TableName), d.Key, d.ExpressionAttributeValues
	}
	if p := it.Put; p != nil {
		actions++
		m.table, m.put, values = aws.ToString(p.TableName), p.Item, p.ExpressionAttributeValues
		if len(p.Item) == 0 {
			return m, errors.New("a Put without an Item")
		}
	}
	switch {
	case actions != 1:
		return m, fmt.Errorf("%d actions in one TransactWriteItem, want exactly one of ConditionCheck, Put, Update, Delete", actions)
	case m.table == "":
		return m, errors.New("no TableName")
	case m.put == nil && len(m.key) == 0:
		return m, fmt.Errorf("no Key (table %s)", m.table)
	}
	m.size = ItemSize(m.key) + ItemSize(m.put) + ItemSize(values)
	if m.put != nil && m.table == aws.ToString(s.table) {
		m.key = pickKey(m.put, s.keyAttrs())
	}
	return m, nil
}

// keyAttrs are the names of the table's key attributes, sorted.
func (s *Store) keyAttrs() []string {
	if s.opts.SortKeyAttr == "" {
		return []string{s.opts.KeyAttr}
	}
	return slices.Sorted(slices.Values([]string{s.opts.KeyAttr, s.opts.SortKeyAttr}))
}

// pickKey is the key of a Put's item under a key schema (the names of its
// attributes), nil if the item lacks one of them (DynamoDB refuses it).
func pickKey(item map[string]types.AttributeValue, names []string) map[string]types.AttributeValue {
	key := make(map[string]types.AttributeValue, len(names))
	for _, n := range names {
		v, ok := item[n]
		if !ok {
			return nil
		}
		key[n] = v
	}
	return key
}

// checkActions refuses, before any call, a transaction of the items meta
// (and of the record id's completion, when id is set) that has more actions
// than DynamoDB allows, or two actions on one item. A Put's key is learned
// from the key schema of its table, when known (the Store's own table, or
// one another item names by Key); it is filled in meta.
func (s *Store) checkActions(id string, meta []itemMeta) error {
	actions := len(meta)
	if id != "" {
		actions++
	}
	if actions > MaxTransactActions {
		return fmt.Errorf("%w: %d actions (the record's completion included), DynamoDB allows %d", ErrTxLimit, actions, MaxTransactActions)
	}
	schemas := map[string][]string{}
	for _, m := range meta {
		if m.put == nil {
			schemas[m.table] = slices.Sorted(func(yield func(string) bool) {
				for n := range m.key {
					if !yield(n) {
						return
					}
				}
			})
		}
	}
	seen := make(map[string]int, actions)
	if id != "" {
		seen[keyString(aws.ToString(s.table), s.key(id))] = -1
	}
	for i := range meta {
		m := &meta[i]
		if m.key == nil {
			if names, ok := schemas[m.table]; ok {
				m.key = pickKey(m.put, names)
			}
			if m.key == nil {
				continue
			}
		}
		k := keyString(m.table, m.key)
		if j, dup := seen[k]; dup {
			other := fmt.Sprintf("item %d", j)
			if j < 0 {
				other = "the record's own completion"
			}
			return fmt.Errorf("%w: item %d and %s act on one item (table %s, key %s): DynamoDB allows one action per item",
				ErrTxLimit, i, other, m.table, formatKey(m.key))
		}
		seen[k] = i
	}
	return nil
}

// checkBytes refuses items meta and a completion of recSize bytes whose
// total passes MaxTransactBytes. Sizes are measured on the request with
// DynamoDB's item size rules: a Put's item, the key and the expression
// values of the other actions (ItemSize). DynamoDB measures the items themselves, so
// an Update that grows a large item can still be refused at commit
// (storage.ErrTxAborted).
func checkBytes(meta []itemMeta, recSize int) error {
	total := recSize
	for _, m := range meta {
		total += m.size
	}
	if total > MaxTransactBytes {
		return fmt.Errorf("%w: the items come to about %d bytes (the record's completion: %d), DynamoDB allows %d",
			ErrTxLimit, total, recSize, MaxTransactBytes)
	}
	return nil
}

// keyString is an unambiguous form of an item's table and key.
func keyString(table string, key map[string]types.AttributeValue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%s", len(table), table)
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range key {
			if !yield(n) {
				return
			}
		}
	}) {
		v := keyValue(key[n])
		fmt.Fprintf(&b, "|%d:%s=%d:%s", len(n), n, len(v), v)
	}
	return b.String()
}

// keyValue is a key attribute's value with its type (S, N or B).
func keyValue(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S" + v.Value
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return "B" + hex.EncodeToString(v.Value)
	default:
		return fmt.Sprintf("%T%v", v, v)
	}
}

// formatKey writes a key for an error message: {name=value, ...}, sorted.
func formatKey(key map[string]types.AttributeValue) string {
	parts := make([]string, 0, len(key))
	for n, v := range key {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			parts = append(parts, fmt.Sprintf("%s=%q", n, v.Value))
		case *types.AttributeValueMemberN:
			parts = append(parts, n+"="+v.Value)
		case *types.AttributeValueMemberB:
			parts = append(parts, n+"=0x"+hex.EncodeToString(v.Value))
		default:
			parts = append(parts, fmt.Sprintf("%s=%T", n, v))
		}
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}
