package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// Store is an storage.Store kept in a DynamoDB table. Create it with New.
// A Store is safe for concurrent use.
type Store struct {
	client   Client
	table    *string
	opts     Options
	staticPK types.AttributeValue // the partition key value in the composite layout

	claims         [8]claimExpr   // by claimShape.index
	replace        [2]replaceExpr // without and with a lease end in the replaced record
	complete       completeExpr
	completeNoData completeExpr
	release        releaseExpr
	appendStep     appendStepExpr
	suspend        suspendExpr
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
		client:         client,
		table:          &table,
		opts:           opts,
		staticPK:       attrS(opts.StaticPartitionKey),
		claims:         compileClaims(&opts),
		replace:        [2]replaceExpr{compileReplace(&opts, false), compileReplace(&opts, true)},
		complete:       compileComplete(&opts, true),
		completeNoData: compileComplete(&opts, false),
		release:        compileRelease(&opts),
		appendStep:     compileAppendStep(&opts),
		suspend:        compileSuspend(&opts),
	}
}

// Options returns a copy of the Store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Claim implements storage.Store with one conditional UpdateItem that
// writes every attribute of rec and leaves the stored steps as they are (see
// claimExpr): a takeover for the same payload keeps the steps it resumes in
// the same atomic write, and ReturnValues=ALL_OLD hands them back with the
// replaced item, so resuming costs no extra call. A refused claim costs
// nothing more either: DynamoDB returns the live item with the conditional
// failure. Only when it does not (some DynamoDB-compatible servers) is the
// item read with one consistent GetItem; if that item is gone or no longer
// live, the claim is tried once more.
//
// The condition refuses one kind of record the liveness rule lets the claim
// replace: one that holds steps the claim may not keep (it has expired, or
// only one side of the takeover carries a fingerprint). Claim then replaces
// it with a second write, a PutItem of rec conditioned on the record being
// exactly as read (see replaceExpr), which drops the steps; this rare case
// costs one call more.
//
// A claim retried by the SDK after its first response was lost finds the
// caller's own lease, which its condition admits: the claim counts as made
// (TookOver and Resumed are then false, as the first response that knew
// otherwise was lost), and the steps it kept come back again.
//
// The replaced item, which ALL_OLD returns, tells what the claim replaced:
// another owner's INPROGRESS record is a takeover (ClaimResult.TookOver)
// unless it carries Options.SuspendedAttr, which makes it a resume
// (ClaimResult.Resumed). The claim removes that attribute.
func (s *Store) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	in := s.claimInput(&rec, now)
	for attempt := 1; ; attempt++ {
		out, err := s.client.UpdateItem(ctx, in)
		if err == nil {
			return s.claimed(out.Attributes, rec.Lease)
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

// claimInput is the claim's UpdateItem for rec at now.
func (s *Store) claimInput(rec *storage.Record, now time.Time) *dynamodb.UpdateItemInput {
	shape := claimShape{fingerprint: rec.Fingerprint != "", leaseEnd: !rec.LeaseExpiresAt.IsZero(), data: len(rec.Data) > 0}
	e := &s.claims[shape.index()]
	values := make(map[string]types.AttributeValue, 11)
	values[e.now] = attrN(now.Unix())
	values[e.nowMs] = attrN(now.UnixMilli())
	values[e.inProgress] = inProgressAttrValue
	values[e.status] = attrS(string(rec.Status))
	values[e.expiration] = attrN(rec.ExpiresAt.Unix())
	values[e.lease] = attrS(rec.Lease)
	values[e.version] = attrN(int64(rec.Version))
	values[e.recordVersion] = recordVersionValue
	if shape.leaseEnd {
		values[e.leaseEnd] = attrN(rec.LeaseExpiresAt.UnixMilli())
	}
	if shape.fingerprint {
		values[e.validation] = attrS(rec.Fingerprint)
	}
	if shape.data {
		values[e.data] = &types.AttributeValueMemberB{Value: rec.Data}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 s.key(rec.ID),
		UpdateExpression:                    e.update,
		ConditionExpression:                 e.condition,
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// claimed is the result of a claim whose write succeeded over old (the
// replaced item, empty for a new key). By the claim condition, old holds
// steps only when they are the caller's to keep: old was resumable, or it
// carries the caller's lease (a retried claim, which kept them the first
// time). The steps were kept in the record, so steps that cannot be read
// fail the claim (the record is then held until its lease lapses, and
// replaced once it expires).
func (s *Store) claimed(old map[string]types.AttributeValue, lease string) (storage.ClaimResult, error) {
	res := storage.ClaimResult{Claimed: true}
	res.TookOver, res.Resumed = s.replacedOwner(old, lease)
	if len(old) == 0 {
		return res, nil
	}
	steps, err := s.decodeSteps(old)
	if err != nil {
		return storage.ClaimResult{}, fmt.Errorf("dynamostore: claim: the claimed record's steps: %w", err)
	}
	res.Steps = steps
	return res, nil
}

// refused decides on a claim of rec whose condition failed on item (the
// stored item, nil if there is none). done is false when the claim should
// be tried again: no item, or one the condition would now admit.
func (s *Store) refused(ctx context.Context, rec *storage.Record, now time.Time, item map[string]types.AttributeValue) (res storage.ClaimResult, done bool, err error) {
	if len(item) == 0 {
		return storage.ClaimResult{}, false, nil
	}
	if s.hasLease(item, rec.Lease) {
		res, err := s.claimed(item, rec.Lease)
		return res, true, err
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
	if _, hasSteps := item[s.opts.StepsAttr]; !hasSteps || head.Resumable(rec, now) {
		// The condition admits this record: it changed between the claim
		// and the read.
		return storage.ClaimResult{}, false, nil
	}
	return s.replaceRecord(ctx, rec, &head)
}

// replaceRecord writes rec, without steps, over old, a replaceable record
// holding steps rec may not keep, on condition that the record is still
// exactly old. If it changed meanwhile, done is false: the claim is decided
// again on the new record.
func (s *Store) replaceRecord(ctx context.Context, rec, old *storage.Record) (res storage.ClaimResult, done bool, err error) {
	e := &s.replace[0]
	values := make(map[string]types.AttributeValue, 4)
	if !old.LeaseExpiresAt.IsZero() {
		e = &s.replace[1]
		values[e.leaseEnd] = attrN(old.LeaseExpiresAt.UnixMilli())
	}
	values[e.lease] = attrS(old.Lease)
	values[e.status] = attrS(string(old.Status))
	values[e.expiration] = attrN(old.ExpiresAt.Unix())
	out, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                s.claimItem(rec),
		ConditionExpression:                 e.condition,
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		res := storage.ClaimResult{Claimed: true}
		res.TookOver, res.Resumed = s.replacedOwner(out.Attributes, rec.Lease)
		return res, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return storage.ClaimResult{}, true, fmt.Errorf("dynamostore: claim: replace a record whose steps the claim may not keep: %w", err)
	}
	item, err := s.refusingItem(ctx, "claim", rec.ID, ccf)
	if err != nil {
		return storage.ClaimResult{}, true, err
	}
	if s.hasLease(item, rec.Lease) {
		// The SDK retried the replacement after its response was lost.
		return storage.ClaimResult{Claimed: true}, true, nil
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
	e := &s.complete
	values := make(map[string]types.AttributeValue, 4)
	if len(rec.Data) > 0 {
		values[e.data] = &types.AttributeValueMemberB{Value: rec.Data}
	} else {
		e = &s.completeNoData
	}
	values[e.status] = attrS(string(rec.Status))
	values[e.expiration] = attrN(rec.ExpiresAt.Unix())
	values[e.lease] = attrS(rec.Lease)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 s.key(rec.ID),
		UpdateExpression:                    e.update,
		ConditionExpression:                 e.condition,
		ExpressionAttributeNames:            e.names,
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

// itemTooLarge recognizes DynamoDB's refusal of an item past its size limit,
// the backstop for a MaxItemBytes set above it.
func itemTooLarge(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" &&
		strings.Contains(ae.ErrorMessage(), "exceeded the maximum allowed size")
}

// Release implements storage.Store with one DeleteItem conditioned on
// attribute_not_exists(#id) OR #lease = :lease, so deleting an item that is
// already gone succeeds (as a retried release does), and a conditional
// failure means another lease holds the record: storage.ErrLeaseLost, which
// names the record's status as the failure's item (or the one read when
// the failure carries none, see refusingItem) gives it.
func (s *Store) Release(ctx context.Context, id, lease string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           s.table,
		Key:                                 s.key(id),
		ConditionExpression:                 s.release.condition,
		ExpressionAttributeNames:            s.release.names,
		ExpressionAttributeValues:           map[string]types.AttributeValue{s.release.lease: attrS(lease)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("dynamostore: release: %w", err)
	}
	// The condition admits a missing item, so a conditional failure always
	// means the record existed under another lease, whatever the item says:
	// it only names the status (a record read after the failure may be gone
	// by then).
	item, err := s.refusingItem(ctx, "release", id, ccf)
	if err != nil {
		return fmt.Errorf("dynamostore: release: %w (%w)", storage.ErrLeaseLost, err)
	}
	if st := s.status(item); st != "" {
		return fmt.Errorf("dynamostore: release: %w (the record is %s under another lease)", storage.ErrLeaseLost, st)
	}
	return fmt.Errorf("dynamostore: release: %w", storage.ErrLeaseLost)
}
