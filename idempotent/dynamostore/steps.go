package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// emptyList is appendStepExpr's :empty, shared by all calls (the SDK only
// reads its inputs). It is a non-nil empty slice so that it is sent as [].
var emptyList = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}

// AppendStep implements storage.Store with one UpdateItem that appends step
// to the steps list (creating it with the first step), conditioned on
// #lease = :lease AND #status = :inprogress. A step that cannot fit in an
// item of Options.MaxItemBytes even alone is refused before any call; one
// that would push the item past DynamoDB's limit is refused by DynamoDB
// (ValidationException), which writes nothing. Both are reported as
// storage.ErrTooLarge.
//
// The append is not conditioned on the steps already stored, so an SDK
// retry of a call whose response was lost appends the step again; reads
// drop the repeat (the same name with the same result), as names are unique
// within a record.
func (s *Store) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	if size := s.minStepItemSize(id, lease, &step); size > s.opts.MaxItemBytes {
		return fmt.Errorf("dynamostore: append step %q: %w: the item would be at least %d bytes (limit %d)",
			step.Name, storage.ErrTooLarge, size, s.opts.MaxItemBytes)
	}
	e := &s.appendStep
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      s.key(id),
		UpdateExpression:         e.update,
		ConditionExpression:      e.condition,
		ExpressionAttributeNames: e.names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			e.empty:      emptyList,
			e.step:       &types.AttributeValueMemberL{Value: []types.AttributeValue{stepValue(&step)}},
			e.lease:      attrS(lease),
			e.inProgress: inProgressAttrValue,
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return fmt.Errorf("dynamostore: append step %q: %w (the record is gone, completed or has another lease)", step.Name, storage.ErrLeaseLost)
	case itemTooLarge(err):
		return fmt.Errorf("dynamostore: append step %q: %w: %w", step.Name, storage.ErrTooLarge, err)
	default:
		return fmt.Errorf("dynamostore: append step %q: %w", step.Name, err)
	}
}

// Suspend implements storage.Store with one UpdateItem that sets the lease
// end, conditioned on #lease = :lease AND #status = :inprogress. With
// ReturnValuesOnConditionCheckFailure=ALL_OLD a failed condition tells a
// record that is gone (no item comes back: nothing to suspend, not an
// error) from one that another lease holds or that is completed. A
// DynamoDB-compatible server that returns no item with the failure makes
// every failure look like the first.
func (s *Store) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	e := &s.suspend
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      s.key(id),
		UpdateExpression:         e.update,
		ConditionExpression:      e.condition,
		ExpressionAttributeNames: e.names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			e.leaseEnd:   attrN(leaseEnd.UnixMilli()),
			e.lease:      attrS(lease),
			e.inProgress: inProgressAttrValue,
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: suspend: %w", err)
	}
	if len(ccf.Item) == 0 {
		return nil
	}
	if st, ok := ccf.Item[s.opts.StatusAttr].(*types.AttributeValueMemberS); ok && st != nil && s.hasLease(ccf.Item, lease) {
		return fmt.Errorf("dynamostore: suspend: %w (the record is %s)", storage.ErrLeaseLost, st.Value)
	}
	return fmt.Errorf("dynamostore: suspend: %w (the record has another lease)", storage.ErrLeaseLost)
}
