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

// Store is an storage.Store kept in a DynamoDB table. Create it with New.
// A Store is safe for concurrent use.
type Store struct {
	client   Client
	table    *string
	opts     Options
	staticPK types.AttributeValue // the partition key value in the composite layout

	claim          claimExpr // for a claim without a payload fingerprint
	claimBound     claimExpr // for one with: a takeover needs the same payload
	complete       completeExpr
	completeNoData completeExpr
	release        releaseExpr
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
		claim:          compileClaim(&opts, false),
		claimBound:     compileClaim(&opts, true),
		complete:       compileComplete(&opts, true),
		completeNoData: compileComplete(&opts, false),
		release:        compileRelease(&opts),
	}
}

// Options returns a copy of the Store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Claim implements storage.Store with one conditional PutItem. A refused
// claim costs nothing more: DynamoDB returns the live item with the
// conditional failure. Only when it does not (some DynamoDB-compatible
// servers) is the item read with one consistent GetItem; if that item is gone
// or no longer live, the claim is tried once more.
//
// A claim retried by the SDK after its first response was lost fails its
// condition on the caller's own item; the lease token identifies it, and the
// claim counts as made (TookOver is then false, as the first response that
// knew otherwise was lost).
func (s *Store) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	e := &s.claim
	values := make(map[string]types.AttributeValue, 4)
	if rec.Fingerprint != "" {
		e = &s.claimBound
		values[e.validation] = attrS(rec.Fingerprint)
	}
	values[e.now] = attrN(now.Unix())
	values[e.nowMs] = attrN(now.UnixMilli())
	values[e.inProgress] = inProgressAttrValue
	in := &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                s.claimItem(&rec),
		ConditionExpression:                 e.condition,
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	for attempt := 1; ; attempt++ {
		out, err := s.client.PutItem(ctx, in)
		if err == nil {
			return storage.ClaimResult{Claimed: true, TookOver: s.tookOver(out.Attributes, rec.Lease)}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return storage.ClaimResult{}, fmt.Errorf("dynamostore: claim: %w", err)
		}
		item := ccf.Item
		if len(item) == 0 {
			if item, err = s.get(ctx, rec.ID); err != nil {
				return storage.ClaimResult{}, err
			}
		}
		if len(item) > 0 && s.hasLease(item, rec.Lease) {
			return storage.ClaimResult{Claimed: true}, nil
		}
		var existing storage.Record
		if len(item) > 0 {
			if existing, err = s.decode(item); err != nil {
				return storage.ClaimResult{}, fmt.Errorf("dynamostore: claim: %w", err)
			}
			if !existing.Replaceable(&rec, now) {
				return storage.ClaimResult{Existing: &existing}, nil
			}
		}
		// No live record refused the claim: in practice the fallback read
		// found the item deleted (or replaced by one no longer live) between
		// the write and the read. Claim again, once.
		if attempt == 2 {
			return storage.ClaimResult{}, errors.New("dynamostore: claim: refused twice, but no live record was found")
		}
	}
}

// get reads the item holding id with a consistent read; nil if there is none.
func (s *Store) get(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            s.key(id),
		ConsistentRead: &consistentRead,
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: claim: read the refusing record: %w", err)
	}
	return out.Item, nil
}

var consistentRead = true

// hasLease reports whether item carries the lease token.
func (s *Store) hasLease(item map[string]types.AttributeValue, lease string) bool {
	v, ok := item[s.opts.LeaseAttr].(*types.AttributeValueMemberS)
	return ok && v != nil && v.Value == lease
}

// tookOver reports whether the item a successful claim replaced was another
// owner's in-progress record. A replaced item that cannot be decoded does
// not fail the claim: it was expired, or the condition would have held.
func (s *Store) tookOver(old map[string]types.AttributeValue, lease string) bool {
	if len(old) == 0 {
		return false
	}
	st, ok := old[s.opts.StatusAttr].(*types.AttributeValueMemberS)
	return ok && st != nil && st.Value == string(storage.StatusInProgress) && !s.hasLease(old, lease)
}

// Complete implements storage.Store with one UpdateItem conditioned on the
// lease alone, so a retried completion succeeds again. An item larger than
// Options.MaxItemBytes is refused before any call.
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
		TableName:                 s.table,
		Key:                       s.key(rec.ID),
		UpdateExpression:          e.update,
		ConditionExpression:       e.condition,
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return fmt.Errorf("dynamostore: complete: %w (the record is gone or has another lease)", storage.ErrLeaseLost)
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
// failure means another lease holds the record.
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
	// means the record exists under another lease, whether or not the server
	// returned it.
	if st, ok := ccf.Item[s.opts.StatusAttr].(*types.AttributeValueMemberS); ok && st != nil {
		return fmt.Errorf("dynamostore: release: %w (the record is %s under another lease)", storage.ErrLeaseLost, st.Value)
	}
	return fmt.Errorf("dynamostore: release: %w", storage.ErrLeaseLost)
}
