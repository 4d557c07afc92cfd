package dynamostore_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fakeClient is a dynamostore.Client whose calls are plain functions. A call
// without a function fails the test. Calls are recorded by operation name.
type fakeClient struct {
	t          testing.TB
	putItem    func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	updateItem func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	deleteItem func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	getItem    func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)

	mu    sync.Mutex
	calls []string
}

func (f *fakeClient) record(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
}

func (f *fakeClient) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

var errUnexpectedCall = errors.New("fake: unexpected call")

func (f *fakeClient) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.record("PutItem")
	if f.putItem == nil {
		f.t.Errorf("unexpected PutItem")
		return nil, errUnexpectedCall
	}
	return f.putItem(in)
}

func (f *fakeClient) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.record("UpdateItem")
	if f.updateItem == nil {
		f.t.Errorf("unexpected UpdateItem")
		return nil, errUnexpectedCall
	}
	return f.updateItem(in)
}

func (f *fakeClient) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.record("DeleteItem")
	if f.deleteItem == nil {
		f.t.Errorf("unexpected DeleteItem")
		return nil, errUnexpectedCall
	}
	return f.deleteItem(in)
}

func (f *fakeClient) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.record("GetItem")
	if f.getItem == nil {
		f.t.Errorf("unexpected GetItem")
		return nil, errUnexpectedCall
	}
	return f.getItem(in)
}

// ccf is the error DynamoDB returns for a failed condition, with the old item
// when ReturnValuesOnConditionCheckFailure=ALL_OLD was asked for.
func ccf(item map[string]types.AttributeValue) error {
	msg := "The conditional request failed"
	return &types.ConditionalCheckFailedException{Message: &msg, Item: item}
}

var placeholder = regexp.MustCompile(`[#:][0-9A-Za-z_]+`)

// resolve writes an expression with its placeholders replaced: names by the
// attribute name, values by TYPE(value), so tests can assert what DynamoDB
// will evaluate rather than the builder's aliases.
func resolve(t testing.TB, expr *string, names map[string]string, values map[string]types.AttributeValue) string {
	t.Helper()
	if expr == nil {
		t.Fatalf("expression is nil")
	}
	return placeholder.ReplaceAllStringFunc(*expr, func(p string) string {
		if p[0] == '#' {
			n, ok := names[p]
			if !ok {
				t.Errorf("name placeholder %s is not in ExpressionAttributeNames %v", p, names)
			}
			return n
		}
		v, ok := values[p]
		if !ok {
			t.Errorf("value placeholder %s is not in ExpressionAttributeValues", p)
			return p
		}
		return show(v)
	})
}

func show(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S(" + v.Value + ")"
	case *types.AttributeValueMemberN:
		return "N(" + v.Value + ")"
	case *types.AttributeValueMemberB:
		return "B(" + string(v.Value) + ")"
	case *types.AttributeValueMemberBOOL:
		return "BOOL(" + strconv.FormatBool(v.Value) + ")"
	default:
		return "?"
	}
}
