package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// emptyList is appendStepExpr's :empty, shared by all calls (the SDK only
// reads its inputs). It is a non-nil empty slice so that it is sent as [].
var emptyList = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}

// AppendStep implements storage.StepStore with one UpdateItem that appends step
// to the steps list (creating it with the first step), conditioned on
// #lease = :lease AND #status = :inprogress. A failed condition is reported
// as storage.ErrLeaseLost, saying whether the record is gone, held by
// another lease or completed: the item comes with the failure, or is read
// once (see refusingItem). A step that cannot fit in an
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
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      s.key(id),
		UpdateExpression:         aws.String(appendStepUpdate),
		ConditionExpression:      aws.String(ownerCondition),
		ExpressionAttributeNames: s.names.appendStep,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":empty":      emptyList,
			":step":       &types.AttributeValueMemberL{Value: []types.AttributeValue{stepValue(&step)}},
			":lease":      attrS(lease),
			":inprogress": inProgressAttrValue,
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return s.leaseLost(ctx, fmt.Sprintf("append step %q", step.Name), id, lease, ccf)
	case itemTooLarge(err):
		return fmt.Errorf("dynamostore: append step %q: %w: %w", step.Name, storage.ErrTooLarge, err)
	default:
		return fmt.Errorf("dynamostore: append step %q: %w", step.Name, err)
	}
}

// Suspend implements storage.StepStore with one UpdateItem that sets the lease
// end and Options.SuspendedAttr, conditioned on #lease = :lease AND
// #status = :inprogress. With ReturnValuesOnConditionCheckFailure=ALL_OLD a
// failed condition tells a record that is gone (no item: nothing to
// suspend, not an error) from one that another lease holds or that is
// completed (storage.ErrLeaseLost). A failure without the item, from a
// DynamoDB-compatible server that does not return it (or from DynamoDB when
// the record is gone), is decided on the item read with one consistent
// GetItem (see refusingItem).
func (s *Store) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      s.key(id),
		UpdateExpression:         aws.String(suspendUpdate),
		ConditionExpression:      aws.String(ownerCondition),
		ExpressionAttributeNames: s.names.suspend,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":lease_end":  attrN(leaseEnd.UnixMilli()),
			":suspended":  suspendedValue,
			":lease":      attrS(lease),
			":inprogress": inProgressAttrValue,
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
	item, err := s.refusingItem(ctx, "suspend", id, ccf)
	if err != nil {
		return err
	}
	if len(item) == 0 {
		return nil
	}
	if s.hasLease(item, lease) && s.status(item) == string(storage.StatusCompleted) {
		return fmt.Errorf("dynamostore: suspend: %w", storage.ErrAlreadyCompleted)
	}
	return fmt.Errorf("dynamostore: suspend: %w (%s)", storage.ErrLeaseLost, s.fenced(item, lease))
}
