package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The methods below make the Store a storage.AdminStore, for tools such as
// the idemkit command, not the wrapper: they are never on an invocation's
// path, so they build their expressions per call.

var _ storage.AdminStore = (*Store)(nil)

// Get reads the record id with one consistent GetItem, as
// storage.AdminStore says. A *storage.CorruptRecordError shows the item's
// attributes as "TYPE value" (S "x", N 1, B (3 bytes), ...). An expired
// record that TTL has not yet deleted is returned as stored.
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
		return storage.Record{}, fmt.Errorf("dynamostore: get %s: %w", id, storage.ErrNotFound)
	}
	return s.decodeAdmin(out.Item)
}

// decodeAdmin decodes item, reporting failure as a
// *storage.CorruptRecordError.
func (s *Store) decodeAdmin(item map[string]types.AttributeValue) (storage.Record, error) {
	rec, err := s.decode(item)
	if err != nil {
		ce := &storage.CorruptRecordError{Fields: make(map[string]string, len(item)), Err: err}
		if id, ok := item[s.idAttr()].(*types.AttributeValueMemberS); ok {
			ce.ID = id.Value
		}
		for k, v := range item {
			ce.Fields[k] = renderAttr(v)
		}
		return storage.Record{}, ce
	}
	return rec, nil
}

// renderAttr shows an attribute value as TYPE value, for
// storage.CorruptRecordError.Fields.
func renderAttr(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S %q", v.Value)
	case *types.AttributeValueMemberN:
		return "N " + v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B (%d bytes)", len(v.Value))
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL %t", v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberM:
		return fmt.Sprintf("M (%d entries)", len(v.Value))
	case *types.AttributeValueMemberL:
		return fmt.Sprintf("L (%d elements)", len(v.Value))
	case *types.AttributeValueMemberSS:
		return fmt.Sprintf("SS %q", v.Value)
	case *types.AttributeValueMemberNS:
		return fmt.Sprintf("NS %v", v.Value)
	case *types.AttributeValueMemberBS:
		return fmt.Sprintf("BS (%d elements)", len(v.Value))
	}
	return fmt.Sprintf("%T", av)
}

// idAttr is the attribute holding the record id.
func (s *Store) idAttr() string {
	if s.opts.SortKeyAttr != "" {
		return s.opts.SortKeyAttr
	}
	return s.opts.KeyAttr
}

// Delete deletes the record rec.ID as storage.AdminStore says, with one
// DeleteItem conditioned on status, lease, lease end, expiry, fingerprint,
// version, suspension and the number of steps (steps are only ever
// appended to a record under one lease, so a new one shows in the count). A
// failed condition tells a gone record from a changed one by the item DynamoDB returns with it; when
// a server returns none, one consistent GetItem tells them apart.
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
	if len(rec.Steps) == 0 {
		cond = cond.And(expression.AttributeNotExists(name(o.StepsAttr)).Or(
			expression.Equal(expression.Size(name(o.StepsAttr)), expression.Value(numberValue(0)))))
	} else {
		cond = cond.And(expression.Equal(expression.Size(name(o.StepsAttr)), expression.Value(numberValue(int64(len(rec.Steps))))))
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
			return fmt.Errorf("dynamostore: delete %s: %w (%w)", rec.ID, storage.ErrChanged, err)
		}
		if len(item) == 0 {
			// attribute_exists failed: the item is gone (ALL_OLD returns
			// whatever stands, so an empty item means none).
			return fmt.Errorf("dynamostore: delete %s: %w: %w", rec.ID, storage.ErrChanged, storage.ErrNotFound)
		}
		return fmt.Errorf("dynamostore: delete %s: %w", rec.ID, storage.ErrChanged)
	default:
		return fmt.Errorf("dynamostore: delete: %w", err)
	}
}

// numberValue is an N attribute value, for the expression builder (which
// would otherwise marshal a Go int as N too, but through reflection).
func numberValue(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// ScanClient is what Scan needs beyond Client: *dynamodb.Client has both.
type ScanClient interface {
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Scan passes the records opts selects to fn, as storage.AdminStore says,
// page by page (Options.ScanPageSize items a request). In the composite key
// layout it is a Query of the one partition the Store uses, and
// opts.IDPrefix narrows the sort key's range (only those items are read);
// otherwise it is a Scan of the whole table, which reads (and is billed
// for) every item: half a read unit per 4 KB with eventually consistent
// reads, whatever opts filters out on the server. ScanReadUnits adds up
// what it consumed. Scanned counts the items read, Matched those passed.
// The store's client must implement ScanClient.
func (s *Store) Scan(ctx context.Context, opts storage.ScanOptions, fn func(storage.Record, error) bool) error {
	sc, ok := s.client.(ScanClient)
	if !ok {
		return fmt.Errorf("dynamostore: scan: the client (%T) has no Scan and Query methods", s.client)
	}
	composite := s.opts.SortKeyAttr != ""
	var filters []expression.ConditionBuilder
	if opts.Status != "" {
		filters = append(filters, expression.Equal(name(s.opts.StatusAttr), expression.Value(string(opts.Status))))
	}
	if opts.IDPrefix != "" && !composite {
		filters = append(filters, expression.BeginsWith(name(s.opts.KeyAttr), opts.IDPrefix))
	}
	b := expression.NewBuilder()
	switch len(filters) {
	case 1:
		b = b.WithFilter(filters[0])
	case 2:
		b = b.WithFilter(filters[0].And(filters[1]))
	}
	if composite {
		key := expression.KeyEqual(expression.Key(s.opts.KeyAttr), expression.Value(s.opts.StaticPartitionKey))
		if opts.IDPrefix != "" {
			key = key.And(expression.KeyBeginsWith(expression.Key(s.opts.SortKeyAttr), opts.IDPrefix))
		}
		b = b.WithKeyCondition(key)
	}
	var e *expression.Expression
	if len(filters) > 0 || composite {
		built, err := b.Build()
		if err != nil {
			return fmt.Errorf("dynamostore: scan: build expression: %w", err)
		}
		e = &built
	}
	var limit *int32
	if s.opts.ScanPageSize > 0 {
		limit = aws.Int32(s.opts.ScanPageSize)
	}
	var p storage.ScanProgress
	var start map[string]types.AttributeValue
	for {
		var items []map[string]types.AttributeValue
		var scanned int32
		var used *types.ConsumedCapacity
		if composite {
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
			s.addReadUnits(*used.CapacityUnits)
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

func report(progress func(storage.ScanProgress), p storage.ScanProgress) {
	if progress != nil {
		progress(p)
	}
}

// ScanReadUnits is the read capacity the Store's Scans have consumed since
// New, as DynamoDB reported it (zero where it does not): what a Scan costs,
// which storage.ScanProgress, shared by every store, does not hold. Read it
// before and after a Scan for that Scan's.
func (s *Store) ScanReadUnits() float64 {
	return math.Float64frombits(s.readUnits.Load())
}

func (s *Store) addReadUnits(u float64) {
	for {
		old := s.readUnits.Load()
		if s.readUnits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+u)) {
			return
		}
	}
}

// name is an attribute name for the expression builder, which Delete and
// Scan assemble at run time; dots in it are not paths.
func name(n string) expression.NameBuilder { return expression.NameNoDotSplit(n) }
