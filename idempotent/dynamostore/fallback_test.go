package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// fencedOp is one of the Store's writes whose failed condition the store
// interprets, run against a fake client.
type fencedOp struct {
	name string
	call func(context.Context, *dynamostore.Store) error
	// fail makes fc fail the write with err, once it checked that the
	// write asks for the item with a failed condition.
	fail func(fc *fakeClient, err error)
}

func fencedOps() []fencedOp {
	update := func(fc *fakeClient, err error) {
		fc.updateItem = func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			if in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
				return nil, errors.New("fake: the write does not ask for the item on a failed condition")
			}
			return nil, err
		}
	}
	del := func(fc *fakeClient, err error) {
		fc.deleteItem = func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
			if in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
				return nil, errors.New("fake: the write does not ask for the item on a failed condition")
			}
			return nil, err
		}
	}
	return []fencedOp{
		{"complete", func(ctx context.Context, s *dynamostore.Store) error {
			return s.Complete(ctx, completedRecord([]byte("p{}")))
		}, update},
		{"append step", func(ctx context.Context, s *dynamostore.Store) error {
			return s.AppendStep(ctx, testID, ourLease, storage.Step{Name: "charge"})
		}, update},
		{"suspend", func(ctx context.Context, s *dynamostore.Store) error {
			return s.Suspend(ctx, testID, ourLease, t0)
		}, update},
		{"release", func(ctx context.Context, s *dynamostore.Store) error {
			return s.Release(ctx, testID, ourLease)
		}, del},
		{"delete", func(ctx context.Context, s *dynamostore.Store) error {
			return s.Delete(ctx, newRecord())
		}, del},
	}
}

// TestFencedWritesDecideOnTheItem: every write fenced by a condition
// decides on the stored item that failed it. DynamoDB returns the item with
// the failure (ReturnValuesOnConditionCheckFailure=ALL_OLD), which costs no
// call; a server that does not is answered by one consistent GetItem, and
// the outcome is the same. A failure without an item (the record is gone,
// on DynamoDB) is read too: the store cannot tell it from such a server.
func TestFencedWritesDecideOnTheItem(t *testing.T) {
	t.Parallel()
	otherInProgress := inProgressItem("lease-other", t0.Add(time.Minute).UnixMilli())
	otherCompleted := storedItem()
	ourCompleted := storedItem()
	ourCompleted["lease"] = &types.AttributeValueMemberS{Value: ourLease}

	const lost = "idempotent: lease lost to another invocation"
	tests := []struct {
		op   string
		held string                          // what holds the record
		item map[string]types.AttributeValue // nil: the record is gone
		want string                          // "": no error
		is   []error
	}{
		{"complete", "gone", nil, "dynamostore: complete: " + lost + " (the record is gone)", []error{storage.ErrLeaseLost}},
		{"complete", "another owner", otherInProgress,
			"dynamostore: complete: " + lost + " (the record is INPROGRESS under another lease)", []error{storage.ErrLeaseLost}},
		{"complete", "another owner's completion", otherCompleted,
			"dynamostore: complete: " + lost + " (the record is COMPLETED under another lease)", []error{storage.ErrLeaseLost}},

		{"append step", "gone", nil, `dynamostore: append step "charge": ` + lost + " (the record is gone)", []error{storage.ErrLeaseLost}},
		{"append step", "another owner", otherInProgress,
			`dynamostore: append step "charge": ` + lost + " (the record is INPROGRESS under another lease)", []error{storage.ErrLeaseLost}},
		{"append step", "our completion", ourCompleted,
			`dynamostore: append step "charge": ` + lost + " (the record is COMPLETED)", []error{storage.ErrLeaseLost}},

		{"suspend", "gone", nil, "", nil}, // nothing to suspend
		{"suspend", "another owner", otherInProgress,
			"dynamostore: suspend: " + lost + " (the record is INPROGRESS under another lease)", []error{storage.ErrLeaseLost}},
		{"suspend", "our completion", ourCompleted,
			"dynamostore: suspend: " + storage.ErrAlreadyCompleted.Error(), []error{storage.ErrAlreadyCompleted}},

		// The release condition admits a missing item: a failure means
		// another lease held the record, even if it is gone by the read, or
		// that the caller's record is completed.
		{"release", "gone by the read", nil, "dynamostore: release: " + lost, []error{storage.ErrLeaseLost}},
		{"release", "another owner", otherInProgress,
			"dynamostore: release: " + lost + " (the record is INPROGRESS under another lease)", []error{storage.ErrLeaseLost}},
		{"release", "our completion", ourCompleted,
			"dynamostore: release: " + storage.ErrAlreadyCompleted.Error(), []error{storage.ErrAlreadyCompleted}},

		{"delete", "gone", nil, "dynamostore: delete " + testID + ": idempotent: record changed since it was read: idempotent: no record with this id",
			[]error{storage.ErrChanged, storage.ErrNotFound}},
		{"delete", "changed", otherCompleted, "dynamostore: delete " + testID + ": idempotent: record changed since it was read",
			[]error{storage.ErrChanged}},
	}
	ops := make(map[string]fencedOp)
	for _, op := range fencedOps() {
		ops[op.name] = op
	}
	for _, tt := range tests {
		op := ops[tt.op]
		for _, returned := range []bool{true, false} {
			name := tt.op + ", " + tt.held + ", item returned"
			if !returned {
				name = tt.op + ", " + tt.held + ", no item returned"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fc := &fakeClient{t: t}
				withFailure := tt.item
				if !returned {
					withFailure = nil
				}
				op.fail(fc, ccf(withFailure))
				wantCalls := []string{opCall(tt.op)}
				if len(withFailure) == 0 {
					fc.getItem = func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						if in.ConsistentRead == nil || !*in.ConsistentRead {
							return nil, errors.New("fake: the fallback read is not consistent")
						}
						if got := showItem(in.Key); len(got) != 1 || got["id"] != "S("+testID+")" {
							return nil, errors.New("fake: the fallback read is of the wrong key")
						}
						return &dynamodb.GetItemOutput{Item: tt.item}, nil
					}
					wantCalls = append(wantCalls, "GetItem")
				}
				err := op.call(t.Context(), dynamostore.New(fc, testTable))
				if tt.want == "" {
					require.NoError(t, err)
				} else {
					require.EqualError(t, err, tt.want)
				}
				for _, target := range tt.is {
					assert.ErrorIs(t, err, target)
				}
				assert.Equal(t, wantCalls, fc.Calls(), "one call when the item comes with the failure")
			})
		}
	}
}

// opCall is the DynamoDB operation of a fenced write.
func opCall(op string) string {
	if op == "release" || op == "delete" {
		return "DeleteItem"
	}
	return "UpdateItem"
}

// TestFencedWritesFallbackReadFails: when the fallback read fails, a write
// whose failure alone means a lost lease still reports it (with the read's
// error); one that needs the item to decide reports the read's error.
func TestFencedWritesFallbackReadFails(t *testing.T) {
	t.Parallel()
	const readErr = "read the refusing record: boom"
	tests := []struct {
		op   string
		want string
		is   []error
		not  []error
	}{
		{"complete", "dynamostore: complete: idempotent: lease lost to another invocation (dynamostore: complete: " + readErr + ")",
			[]error{storage.ErrLeaseLost, errBoom}, nil},
		{"append step", `dynamostore: append step "charge": idempotent: lease lost to another invocation (dynamostore: append step "charge": ` + readErr + ")",
			[]error{storage.ErrLeaseLost, errBoom}, nil},
		{"release", "dynamostore: release: idempotent: lease lost to another invocation (dynamostore: release: " + readErr + ")",
			[]error{storage.ErrLeaseLost, errBoom}, nil},
		{"suspend", "dynamostore: suspend: " + readErr, []error{errBoom}, []error{storage.ErrLeaseLost}},
		{"delete", "dynamostore: delete " + testID + ": idempotent: record changed since it was read (dynamostore: delete: " + readErr + ")",
			[]error{storage.ErrChanged, errBoom}, []error{storage.ErrNotFound}},
	}
	ops := make(map[string]fencedOp)
	for _, op := range fencedOps() {
		ops[op.name] = op
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, errBoom }}
			ops[tt.op].fail(fc, ccf(nil))
			err := ops[tt.op].call(t.Context(), dynamostore.New(fc, testTable))
			require.EqualError(t, err, tt.want)
			for _, target := range tt.is {
				assert.ErrorIs(t, err, target)
			}
			for _, target := range tt.not {
				assert.NotErrorIs(t, err, target)
			}
		})
	}
}
