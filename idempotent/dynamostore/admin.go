package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The operator methods below (Get, Delete, Scan) serve tools such as the
// idemkit command, not the wrapper: they are never on an invocation's path,
// so they build their expressions per call.

// Errors of the operator methods. Match them with errors.Is.
var (
	// ErrNotFound: no item holds the record id (it never existed, was
	// released, forgotten, or deleted by TTL).
	ErrNotFound = errors.New("dynamostore: no record with this id")

	// ErrChanged: Delete found the record changed since it was read (a
	// completion, a takeover, a new claim, or it is gone); nothing was
	// deleted. Read it again before deciding.
	ErrChanged = errors.New("dynamostore: record changed since it was read")
)

// CorruptError reports an item that does not decode as a record: damaged,
// of a foreign layout, or written by another tool. It wraps
// storage.ErrCorruptRecord; Item holds the item's attributes as stored, so
// they can be shown. Nothing here ever rewrites such an item.
type CorruptError struct {
	// ID is the record id the item is stored under (empty when even that
	// cannot be read).
	ID string
	// Item is the raw item.
	Item map[string]types.AttributeValue
	// Err says what is wrong; it wraps storage.ErrCorruptRecord.
	Err error
}

// Error names the record and what is wrong with it.
func (e *CorruptError) Error() string {
	if e.ID == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("record %s: %v", e.ID, e.Err)
}

// Unwrap returns Err, which wraps storage.ErrCorruptRecord.
func (e *CorruptError) Unwrap() error { return e.Err }

// Get reads the record id with one consistent GetItem. It returns an error
// wrapping ErrNotFound when there is no such item, and a *CorruptError
// (wrapping storage.ErrCorruptRecord) when the item does not decode. An
// expired record that TTL has not yet deleted is returned as stored: see
// storage.Record.Expired.
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            s.key(id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return storage.Record{}, fmt.Errorf("dynamostore: get: %w", err)
	}
	if len(out.Item) == 0 {
		return storage.Record{}, fmt.Errorf("dynamostore: get %s: %w", id, ErrNotFound)
	}
	return s.decodeAdmin(out.Item)
}

// decodeAdmin decodes item, reporting failure as a *CorruptError.
func (s *Store) decodeAdmin(item map[string]types.AttributeValue) (storage.Record, error) {
	rec, err := s.decode(item)
	if err != nil {
		id, _ := item[s.idAttr()].(*types.AttributeValueMemberS)
		ce := &CorruptError{Item: item, Err: err}
		if id != nil {
			ce.ID = id.Value
		}
		return storage.Record{}, ce
	}
	return rec, nil
}

// idAttr is the attribute holding the record id.
func (s *Store) idAttr() string {
	if s.opts.SortKeyAttr != "" {
		return s.opts.SortKeyAttr
	}
	return s.opts.KeyAttr
}

// Delete deletes the record rec.ID with one DeleteItem conditioned on the
// record still being exactly as rec describes it (as Get returned it):
// status, lease, lease end, expiry, fingerprint, version and whether it is
// suspended. A record that changed meanwhile (completed, taken over,
// suspended, claimed anew, or gone) is left alone and the error wraps
// ErrChanged (and ErrNotFound as well when it is gone). A failed condition
// tells a gone record from a changed one by the item DynamoDB returns with
// it; when a server returns none, one consistent GetItem tells them apart. Deleting a live INPROGRESS record lets a duplicate run the handler
// while its owner may still be running: the caller decides that, not Delete.
func (s *Store) Delete(ctx context.Context, rec storage.Record) error {
	o := &s.opts
	cond := expression.AttributeExists(name(s.idAttr())).
		And(expression.Equal(name(o.StatusAttr), expression.Value(string(rec.Status)))).
		And(expression.Equal(name(o.LeaseAttr), expression.Value(rec.Lease))).
		And(expression.Equal(name(o.ExpirationAttr), expression.Value(numberValue(rec.ExpiresAt.Unix()))))
	if rec.LeaseExpiresAt.IsZero() {
		cond = cond.And(expression.AttributeNotExists(name(o.InProgressExpirationAttr)))
	} else {
		cond = cond.And(expression.Equal(name(o.InProgressExpirationAttr), expression.Value(numberValue(rec.LeaseExpiresAt.UnixMilli()))))
	}
	if rec.Fingerprint == "" {
		cond = cond.And(expression.AttributeNotExists(name(o.ValidationAttr)))
	} else {
		cond = cond.And(expression.Equal(name(o.ValidationAttr), expression.Value(rec.Fingerprint)))
	}
	if rec.Version == 0 {
		cond = cond.And(expression.AttributeNotExists(name(o.VersionAttr)))
	} else {
		cond = cond.And(expression.Equal(name(o.VersionAttr), expression.Value(numberValue(int64(rec.Version)))))
	}
	if rec.Suspended {
		cond = cond.And(expression.Equal(name(o.SuspendedAttr), expression.Value(suspendedValue)))
	} else {
		// A stored false reads as not suspended too.
		cond = cond.And(expression.AttributeNotExists(name(o.SuspendedAttr)).Or(
			expression.Equal(name(o.SuspendedAttr), expression.Value(&types.AttributeValueMemberBOOL{Value: false}))))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("dynamostore: delete: build condition: %w", err)
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           s.table,
		Key:                                 s.key(rec.ID),
		ConditionExpression:                 e.Condition(),
		ExpressionAttributeNames:            e.Names(),
		ExpressionAttributeValues:           e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		item, err := s.refusingItem(ctx, "delete", rec.ID, ccf)
		if err != nil {
			return fmt.Errorf("dynamostore: delete %s: %w (%w)", rec.ID, ErrChanged, err)
		}
		if len(item) == 0 {
			// attribute_exists failed: the item is gone (ALL_OLD returns
			// whatever stands, so an empty item means none).
			return fmt.Errorf("dynamostore: delete %s: %w: %w", rec.ID, ErrChanged, ErrNotFound)
		}
		return fmt.Errorf("dynamostore: delete %s: %w", rec.ID, ErrChanged)
	default:
		return fmt.Errorf("dynamostore: delete: %w", err)
	}
}

// numberValue is an N attribute value, for the expression builder (which
// would otherwise marshal a Go int as N too, but through reflection).
func numberValue(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// ScanOptions bounds and filters a Scan.
type ScanOptions struct {
	// Status, when set, keeps only records of that status. The filter is
	// applied by DynamoDB after reading: it saves transfer, not read capacity.
	Status storage.Status

	// PageSize is the number of items each request reads (the request's
	// Limit); zero or less leaves it to DynamoDB (pages of up to 1 MB).
	PageSize int32

	// Progress, when set, is called after each page.
	Progress func(ScanProgress)
}

// ScanProgress is how far a Scan has come.
type ScanProgress struct {
	// Pages is the number of requests made.
	Pages int
	// Scanned is the number of items read (and paid for), before filtering.
	Scanned int64
	// Matched is the number of items passed to the callback.
	Matched int64
	// ReadUnits is the read capacity consumed so far, as DynamoDB reports it
	// (zero if it does not).
	ReadUnits float64
}

// ScanClient is what Scan needs beyond Client: *dynamodb.Client has both.
type ScanClient interface {
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Scan passes every record of the table (or, with Options.SortKeyAttr, of
// the Store's partition) to fn, page by page, until the table is read, fn
// returns false, or ctx ends. An item that does not decode is passed with a
// *CorruptError and a zero Record. In the composite key layout this is a
// Query of the one partition the Store uses; otherwise it is a Scan of the
// whole table, which reads (and is billed for) every item: half a read unit
// per 4 KB with eventually consistent reads, whatever Status filters out.
// The store's client must implement ScanClient.
func (s *Store) Scan(ctx context.Context, opts ScanOptions, fn func(storage.Record, error) bool) error {
	sc, ok := s.client.(ScanClient)
	if !ok {
		return fmt.Errorf("dynamostore: scan: the client (%T) has no Scan and Query methods", s.client)
	}
	b := expression.NewBuilder()
	if opts.Status != "" {
		b = b.WithFilter(expression.Equal(name(s.opts.StatusAttr), expression.Value(string(opts.Status))))
	}
	if s.opts.SortKeyAttr != "" {
		b = b.WithKeyCondition(expression.KeyEqual(expression.Key(s.opts.KeyAttr), expression.Value(s.opts.StaticPartitionKey)))
	}
	var e *expression.Expression
	if opts.Status != "" || s.opts.SortKeyAttr != "" {
		built, err := b.Build()
		if err != nil {
			return fmt.Errorf("dynamostore: scan: build expression: %w", err)
		}
		e = &built
	}
	var limit *int32
	if opts.PageSize > 0 {
		limit = aws.Int32(opts.PageSize)
	}
	var p ScanProgress
	var start map[string]types.AttributeValue
	for {
		var items []map[string]types.AttributeValue
		var scanned int32
		var used *types.ConsumedCapacity
		if s.opts.SortKeyAttr != "" {
			out, err := sc.Query(ctx, &dynamodb.QueryInput{
				TableName: s.table, KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(),
				ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
				Limit: limit, ExclusiveStartKey: start, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				return fmt.Errorf("dynamostore: scan (query of partition %q): %w", s.opts.StaticPartitionKey, err)
			}
			items, scanned, used, start = out.Items, out.ScannedCount, out.ConsumedCapacity, out.LastEvaluatedKey
		} else {
			in := &dynamodb.ScanInput{TableName: s.table, Limit: limit, ExclusiveStartKey: start,
				ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
			if e != nil {
				in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.Filter(), e.Names(), e.Values()
			}
			out, err := sc.Scan(ctx, in)
			if err != nil {
				return fmt.Errorf("dynamostore: scan: %w", err)
			}
			items, scanned, used, start = out.Items, out.ScannedCount, out.ConsumedCapacity, out.LastEvaluatedKey
		}
		p.Pages++
		p.Scanned += int64(scanned)
		if used != nil && used.CapacityUnits != nil {
			p.ReadUnits += *used.CapacityUnits
		}
		for _, item := range items {
			p.Matched++
			if !fn(s.decodeAdmin(item)) {
				report(opts.Progress, p)
				return nil
			}
		}
		report(opts.Progress, p)
		if len(start) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("dynamostore: scan: %w", err)
		}
	}
}

func report(progress func(ScanProgress), p ScanProgress) {
	if progress != nil {
		progress(p)
	}
}

// name is an attribute name for the expression builder, which Delete and
// Scan assemble at run time; dots in it are not paths.
func name(n string) expression.NameBuilder { return expression.NameNoDotSplit(n) }
