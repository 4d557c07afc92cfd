package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Client is the part of the DynamoDB API a Store uses. *dynamodb.Client
// satisfies it; tests can pass a fake.
type Client interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var (
	_ Client        = (*dynamodb.Client)(nil)
	_ storage.Store = (*Store)(nil)
)

// inProgressAttrValue is the claim condition's :inprogress, shared by all
// calls (the SDK only reads its inputs).
var inProgressAttrValue = attrS(string(storage.StatusInProgress))

// recordVersionValue is the claim condition's :record_version, the only
// format version a claim takes over (shared as inProgressAttrValue is).
var recordVersionValue = attrN(storage.RecordVersion)

// completedAttrValue is a completion's :status (shared as
// inProgressAttrValue is).
var completedAttrValue = attrS(string(storage.StatusCompleted))

// Store is an storage.Store kept in a DynamoDB table. Create it with New.
// A Store is safe for concurrent use.
type Store struct {
	client   Client
	table    *string
	opts     Options
	staticPK types.AttributeValue // the partition key value in the composite layout

	names exprNames // of the expressions in expr.go

	readUnits atomic.Uint64 // ScanReadUnits, as float64 bits
}

// New returns a Store that keeps its records in table through client. The
// options start from the defaults documented on Options; each optFn then
// modifies them.
//
// New panics if client is nil, table is empty or two attributes share a name:
// these are programmer errors, found at start-up.
func New(client Client, table string, optFns ...func(*Options)) *Store {
	if client == nil {
		panic("dynamostore: New: nil client")
	}
	if table == "" {
		panic("dynamostore: New: empty table name")
	}
	opts := defaultOptions()
	for _, fn := range optFns {
		fn(&opts)
	}
	opts.normalize()
	names := opts.attrNames()
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			panic(fmt.Sprintf("dynamostore: New: attribute name %q is used twice", names[i]))
		}
	}
	return &Store{
		client:   client,
		table:    &table,
		opts:     opts,
		staticPK: attrS(opts.StaticPartitionKey),
		names:    newExprNames(&opts),
	}
}

// Options returns a copy of the Store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Claim implements storage.Store with one conditional PutItem of the whole
// new record (see claimCondition), with ReturnValues=ALL_OLD: the replaced
// item, if any, tells what the claim replaced — another owner's INPROGRESS
// record is a takeover (ClaimResult.TookOver), or a resume
// (ClaimResult.Resumed) when it carries Options.SuspendedAttr. A refused
// claim costs nothing more: DynamoDB returns the live item with the
// conditional failure (ReturnValuesOnConditionCheckFailure=ALL_OLD). Only
// when it does not (some DynamoDB-compatible servers) is the item read with
// one consistent GetItem; if that item is gone or no longer live, the claim
// is tried once more.
//
// The condition refuses one kind of record the liveness rule lets the claim
// replace: a lapsed one that holds steps, which the PutItem would drop.
// Claim then writes a second PutItem over it, conditioned on the record
// being exactly as read (see replaceCondition): with its steps when the
// claim resumes it (the same payload, storage.Record.Resumable), without
// them otherwise. Resuming steps thus costs one call more than a claim.
//
// A claim retried by the SDK after its first response was lost finds the
// caller's own lease, which its condition admits: the claim counts as made
// (TookOver and Resumed are then false, as the first response that knew
// otherwise was lost). A second write retried so fails its condition on the
// record it wrote, which carries the caller's lease: claimed too, with the
// steps it kept.
func (s *Store) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	in := s.claimInput(&rec, now)
	for attempt := 1; ; attempt++ {
		out, err := s.client.PutItem(ctx, in)
		if err == nil {
			res := storage.ClaimResult{Claimed: true}
			res.TookOver, res.Resumed = s.replacedOwner(out.Attributes, rec.Lease)
			return res, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return storage.ClaimResult{}, fmt.Errorf("dynamostore: claim: %w", err)
		}
		item, err := s.refusingItem(ctx, "claim", rec.ID, ccf)
		if err != nil {
			return storage.ClaimResult{}, err
		}
		res, done, err := s.refused(ctx, &rec, now, item)
		if done || err != nil {
			return res, err
		}
		// No live record refused the claim: in practice the fallback read
		// found the item deleted (or replaced by one no longer live) between
		// the write and the read, or the record changed under a
		// replacement. Claim again, once.
		if attempt == 2 {
			return storage.ClaimResult{}, errors.New("dynamostore: claim: refused twice, but no live record was found")
		}
	}
}

// claimInput is the claim's PutItem for rec at now.
func (s *Store) claimInput(rec *storage.Record, now time.Time) *dynamodb.PutItemInput {
	vals := new(requestValues)
	cond, names := claimConditionPtr, s.names.claim
	values := map[string]types.AttributeValue{
		":lease":          vals.lease(rec.Lease),
		":now":            vals.num(now.Unix()),
		":now_ms":         vals.num(now.UnixMilli()),
		":inprogress":     inProgressAttrValue,
		":record_version": recordVersionValue,
	}
	if rec.Fingerprint != "" {
		cond, names = claimConditionBoundPtr, s.names.claimBound
		values[":validation"] = vals.fingerprint(rec.Fingerprint)
	}
	return &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                s.claimItem(rec, vals),
		ConditionExpression:                 cond,
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// refused decides on a claim of rec whose condition failed on item (the
// stored item, nil if there is none). done is false when the claim should
// be tried again: no item, or one the condition would now admit.
func (s *Store) refused(ctx context.Context, rec *storage.Record, now time.Time, item map[string]types.AttributeValue) (res storage.ClaimResult, done bool, err error) {
	if len(item) == 0 {
		return storage.ClaimResult{}, false, nil
	}
	if s.hasLease(item, rec.Lease) {
		// Our own record. The claim's condition admits the caller's lease,
		// so DynamoDB never refuses it so; a read (see refusingItem) may
		// find it, written by a replacement (replaceRecord) that the SDK
		// sent again after its response was lost, which kept the steps.
		steps, err := s.decodeSteps(item)
		if err != nil {
			return storage.ClaimResult{}, true, fmt.Errorf("dynamostore: claim: the claimed record's steps: %w", err)
		}
		return storage.ClaimResult{Claimed: true, Steps: steps}, true, nil
	}
	head, err := s.decodeRecordHead(item)
	if err != nil {
		return storage.ClaimResult{}, true, fmt.Errorf("dynamostore: claim: %w", err)
	}
	if !head.Replaceable(rec, now) {
		existing, err := s.decode(item)
		if err != nil {
			return storage.ClaimResult{}, true, fmt.Errorf("dynamostore: claim: %w", err)
		}
		return storage.ClaimResult{Existing: &existing}, true, nil
	}
	if _, hasSteps := item[s.opts.StepsAttr]; !hasSteps || head.Expired(now) {
		// The condition admits this record: it changed between the claim
		// and the read.
		return storage.ClaimResult{}, false, nil
	}
	return s.replaceRecord(ctx, rec, &head, item, head.Resumable(rec, now))
}

// replaceRecord writes rec over old, a lapsed record that holds steps (item
// is old as stored), on condition that the record is still exactly old: with
// its steps when resume is set (see resumeCondition), without them otherwise
// (replaceCondition). Steps that cannot be read are not resumed: the claim
// fails, writing nothing. If the record changed meanwhile, done is false:
// the claim is decided again on the new record.
func (s *Store) replaceRecord(ctx context.Context, rec, old *storage.Record, item map[string]types.AttributeValue, resume bool) (res storage.ClaimResult, done bool, err error) {
	in := &dynamodb.PutItemInput{
		TableName:                s.table,
		Item:                     s.claimItem(rec, new(requestValues)),
		ConditionExpression:      aws.String(replaceCondition),
		ExpressionAttributeNames: s.names.replace,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":old_lease":      attrS(old.Lease),
			":inprogress":     inProgressAttrValue,
			":old_expiration": attrN(old.ExpiresAt.Unix()),
			":old_lease_end":  attrN(old.LeaseExpiresAt.UnixMilli()),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var kept []storage.Step
	if resume {
		if kept, err = s.decodeSteps(item); err != nil {
			return storage.ClaimResult{}, true, fmt.Errorf("dynamostore: claim: the resumed record's steps: %w", err)
		}
		steps := item[s.opts.StepsAttr].(*types.AttributeValueMemberL) // decodeSteps checked it
		in.Item[s.opts.StepsAttr] = steps
		in.ConditionExpression = aws.String(resumeCondition)
		in.ExpressionAttributeNames = s.names.resume
		in.ExpressionAttributeValues[":old_steps"] = attrN(int64(len(steps.Value)))
	}
	out, err := s.client.PutItem(ctx, in)
	if err == nil {
		res := storage.ClaimResult{Claimed: true, Steps: kept}
		res.TookOver, res.Resumed = s.replacedOwner(out.Attributes, rec.Lease)
		return res, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return storage.ClaimResult{}, true, fmt.Errorf("dynamostore: claim: replace a lapsed record that holds steps: %w", err)
	}
	item, err = s.refusingItem(ctx, "claim", rec.ID, ccf)
	if err != nil {
		return storage.ClaimResult{}, true, err
	}
	if s.hasLease(item, rec.Lease) {
		// The SDK sent the replacement again after its response was lost:
		// the record is the one it wrote.
		return storage.ClaimResult{Claimed: true, Steps: kept}, true, nil
	}
	return storage.ClaimResult{}, false, nil
}

// refusingItem is the item on which the condition of op's write on record
// id failed: the one DynamoDB returned with the failure
// (ReturnValuesOnConditionCheckFailure=ALL_OLD), so deciding on it costs no
// call. When the failure carries no item, the item is read with one
// consistent GetItem (nil if there is none), and the caller decides on it
// exactly as if it had come with the failure. Some DynamoDB-compatible
// servers ignore ReturnValuesOnConditionCheckFailure; with DynamoDB itself a
// failure carries no item only when there is none (a write fenced by the
// lease on a record that is gone, a rare case), and the read confirms it.
func (s *Store) refusingItem(ctx context.Context, op, id string, ccf *types.ConditionalCheckFailedException) (map[string]types.AttributeValue, error) {
	if len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            s.key(id),
		ConsistentRead: &consistentRead,
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: %s: read the refusing record: %w", op, err)
	}
	return out.Item, nil
}

var consistentRead = true

// hasLease reports whether item carries the lease token.
func (s *Store) hasLease(item map[string]types.AttributeValue, lease string) bool {
	v, ok := item[s.opts.LeaseAttr].(*types.AttributeValueMemberS)
	return ok && v != nil && v.Value == lease
}

// replacedOwner tells what the item a successful claim replaced was:
// another owner's in-progress record is a takeover, or a resume when it was
// suspended. A replaced item that cannot be decoded does not fail the claim:
// it was expired, or the condition would have held.
func (s *Store) replacedOwner(old map[string]types.AttributeValue, lease string) (tookOver, resumed bool) {
	if len(old) == 0 || s.hasLease(old, lease) || s.status(old) != string(storage.StatusInProgress) {
		return false, false
	}
	if v, ok := old[s.opts.SuspendedAttr].(*types.AttributeValueMemberBOOL); ok && v != nil && v.Value {
		return false, true
	}
	return true, false
}

// status is item's status, "" if it has none it can read.
func (s *Store) status(item map[string]types.AttributeValue) string {
	if st, ok := item[s.opts.StatusAttr].(*types.AttributeValueMemberS); ok && st != nil {
		return st.Value
	}
	return ""
}

// leaseLost is the error of op's write on record id fenced by lease, whose
// condition failed with ccf: storage.ErrLeaseLost, saying what holds the
// record. The failure alone decides it; the item (see refusingItem) only
// names the reason, so a failed read is reported with the lost lease, not
// instead of it.
func (s *Store) leaseLost(ctx context.Context, op, id, lease string, ccf *types.ConditionalCheckFailedException) error {
	item, err := s.refusingItem(ctx, op, id, ccf)
	if err != nil {
		return fmt.Errorf("dynamostore: %s: %w (%w)", op, storage.ErrLeaseLost, err)
	}
	return fmt.Errorf("dynamostore: %s: %w (%s)", op, storage.ErrLeaseLost, s.fenced(item, lease))
}

// fenced says why a write fenced by lease failed on item, the stored item
// (nil if there is none): the record is gone, another lease holds it, or it
// is the caller's but no longer in progress.
func (s *Store) fenced(item map[string]types.AttributeValue, lease string) string {
	st := s.status(item)
	switch {
	case len(item) == 0:
		return "the record is gone"
	case s.hasLease(item, lease):
		return "the record is " + st
	case st == "":
		return "the record has another lease"
	default:
		return "the record is " + st + " under another lease"
	}
}

// Complete implements storage.Store with one UpdateItem conditioned on the
// lease alone, so a retried completion succeeds again; it removes the
// steps and the suspended mark. An item larger than Options.MaxItemBytes is
// refused before any call. A failed condition is reported as
// storage.ErrLeaseLost, saying what holds the record: the item comes with
// the failure, or is read once (see refusingItem).
func (s *Store) Complete(ctx context.Context, rec storage.Record) error {
	if size := s.completedSize(&rec); size > s.opts.MaxItemBytes {
		return fmt.Errorf("dynamostore: complete: %w: the item would be %d bytes (limit %d)", storage.ErrTooLarge, size, s.opts.MaxItemBytes)
	}
	vals := new(requestValues)
	update, values := s.completion(&rec, vals)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 s.keyOf(vals.str(rec.ID)),
		UpdateExpression:                    update,
		ConditionExpression:                 leaseConditionPtr,
		ExpressionAttributeNames:            s.names.complete,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return s.leaseLost(ctx, "complete", rec.ID, rec.Lease, ccf)
	case itemTooLarge(err):
		return fmt.Errorf("dynamostore: complete: %w: %w", storage.ErrTooLarge, err)
	default:
		return fmt.Errorf("dynamostore: complete: %w", err)
	}
}

// completion is the update expression of rec's completion and its values
// (from vals), the fence's :lease included: Complete's, and the record's
// action in a transaction's commit (Tx.Commit), which adds its own
// condition's values.
func (s *Store) completion(rec *storage.Record, vals *requestValues) (*string, map[string]types.AttributeValue) {
	update := completeUpdatePtr
	values := map[string]types.AttributeValue{
		":status":     vals.status(rec.Status),
		":expiration": vals.num(rec.ExpiresAt.Unix()),
		":lease":      vals.lease(rec.Lease),
	}
	traced := rec.Trace != ""
	if traced {
		values[":trace"] = vals.str(rec.Trace)
		update = completeUpdateTracePtr
	}
	if len(rec.Data) > 0 {
		values[":data"] = &types.AttributeValueMemberB{Value: rec.Data}
	} else if traced {
		update = completeUpdateNoDataTracePtr
	} else {
		update = completeUpdateNoDataPtr
	}
	return update, values
}

// itemTooLarge recognizes DynamoDB's refusal of an item past its size limit,
// the backstop for a MaxItemBytes set above it.
func itemTooLarge(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" &&
		strings.Contains(ae.ErrorMessage(), "exceeded the maximum allowed size")
}

// Release implements storage.Store with one DeleteItem conditioned on
// attribute_not_exists(#id) OR (#lease = :lease AND #status = :inprogress),
// so deleting an item that is already gone succeeds (as a retried release
// does), and a conditional failure means another lease holds the record
// (storage.ErrLeaseLost, naming the record's status) or the caller's record
// is completed (storage.ErrAlreadyCompleted), as the failure's item (or the
// one read when the failure carries none, see refusingItem) tells.
func (s *Store) Release(ctx context.Context, id, lease string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           s.table,
		Key:                                 s.key(id),
		ConditionExpression:                 aws.String(releaseCondition),
		ExpressionAttributeNames:            s.names.release,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":lease": attrS(lease), ":inprogress": inProgressAttrValue},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: release: %w", err)
	}
	// The condition admits a missing item, so a conditional failure means
	// the record existed under another lease, or under the caller's and
	// completed. The item (with the failure, else read: a record read after
	// the failure may be gone by then) tells which.
	item, err := s.refusingItem(ctx, "release", id, ccf)
	if err != nil {
		return fmt.Errorf("dynamostore: release: %w (%w)", storage.ErrLeaseLost, err)
	}
	if s.hasLease(item, lease) && s.status(item) == string(storage.StatusCompleted) {
		return fmt.Errorf("dynamostore: release: %w", storage.ErrAlreadyCompleted)
	}
	if st := s.status(item); st != "" {
		return fmt.Errorf("dynamostore: release: %w (the record is %s under another lease)", storage.ErrLeaseLost, st)
	}
	return fmt.Errorf("dynamostore: release: %w", storage.ErrLeaseLost)
}
