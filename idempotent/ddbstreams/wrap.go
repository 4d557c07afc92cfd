package ddbstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// The event names of a stream record (Change.EventName).
const (
	Insert = "INSERT" // a new item was put
	Modify = "MODIFY" // an existing item was changed
	Remove = "REMOVE" // an item was deleted (by TTL too)
)

// Change is one stream record, as a wrapped handler gets it: the item's key
// and its images before and after the change, decoded into T with
// attributevalue.UnmarshalMap (use the dynamodbav struct tags of T).
type Change[T any] struct {
	// EventName is Insert, Modify or Remove.
	EventName string
	// Key is the primary key of the changed item decoded into T: its key
	// fields are set, the others zero.
	Key T
	// Keys holds the primary key's attributes as the SDK's types.
	Keys map[string]types.AttributeValue
	// OldImage is the item before the change, NewImage after it; nil when
	// the record carries none (an INSERT has no old image, a REMOVE no new
	// one, and the stream's view type may leave either out).
	OldImage, NewImage *T
	// SequenceNumber orders the records of a shard; EventID names the record.
	SequenceNumber, EventID string
}

// Wrap returns a Lambda handler for DynamoDB Streams batches that decodes
// each record into a Change[T] and calls handle once per idempotency key,
// through e, in the order of the shard, reporting where the shard must be
// read again as a partial batch response. e's store keeps the records, and
// its settings (prefix, expiry, logger, outcome hooks, optional keys) apply.
// The event source mapping must enable ReportBatchItemFailures (see the
// package documentation).
//
// An image that does not decode into T, or a new image that fails
// validation (when T or *T has a method Validate() error), makes its record
// a failure without calling handle.
//
// Wrap panics if e or handle is nil, or if an option's function takes
// another type than the handler's (see Option).
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, c Change[T]) error, opts ...Option) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if handle == nil {
		panic("ddbstreams: Wrap: nil handler")
	}
	src := batch.Source[events.DynamoDBEventRecord, Change[T]]{
		Name:   "ddbstreams",
		Noun:   "record",
		Handle: handle,
		Decode: decode[T],
		Key: func(r *events.DynamoDBEventRecord, _ Change[T]) (string, error) {
			return r.EventID, nil
		},
		// No payload validation by default: later changes of one item are
		// not duplicates of each other, and under the default key a record
		// delivered again is unchanged anyway (see the package
		// documentation).
		Attrs: func(r *events.DynamoDBEventRecord) []slog.Attr {
			return []slog.Attr{slog.String("sequence_number", r.Change.SequenceNumber)}
		},
		Context: func(ctx context.Context, r *events.DynamoDBEventRecord) context.Context {
			return context.WithValue(ctx, recordKey{}, r)
		},
	}
	o := batch.Apply(opts)
	b := &batcher[T]{p: batch.New(e, "Wrap", src, o), parallel: o.Parallelism() > 1, stop: !o.Continue()}
	return b.handleBatch
}

// RecordFromContext returns the stream record being processed. It is set in
// the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a record's outcome.
func RecordFromContext(ctx context.Context) (events.DynamoDBEventRecord, bool) {
	if r, ok := ctx.Value(recordKey{}).(*events.DynamoDBEventRecord); ok {
		return *r, true
	}
	return events.DynamoDBEventRecord{}, false
}

type recordKey struct{}

type batcher[T any] struct {
	p        *batch.Processor[events.DynamoDBEventRecord, Change[T]]
	parallel bool // lanes per item
	stop     bool
}

// handleBatch processes one DynamoDB Streams event. It never returns an
// error: an error would make Lambda retry the whole batch, the records done
// included.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	if len(ev.Records) == 0 {
		return resp, nil
	}
	recs := ev.Records
	// A batch holds the records of one shard; the stream ARN stands for it.
	unit := func(i int) string { return recs[i].EventSourceArn }
	order := batch.Order{Stop: b.stop, LaneNoun: "shard", Lane: func(i int, _ string) string { return "shard:" + unit(i) }}
	if b.parallel {
		order.LaneNoun = "item"
		order.Lane = func(i int, _ string) string { return "item:" + unit(i) + "\x00" + itemOf(&recs[i]) }
	}
	results := b.p.Run(ctx, recs, order)
	for _, i := range batch.Checkpoints(results, unit) {
		resp.BatchItemFailures = append(resp.BatchItemFailures,
			events.DynamoDBBatchItemFailure{ItemIdentifier: recs[i].Change.SequenceNumber})
	}
	return resp, nil
}

// itemOf names the item a record changed: its key attributes, in name
// order, each with its value as JSON.
func itemOf(r *events.DynamoDBEventRecord) string {
	names := make([]string, 0, len(r.Change.Keys))
	for name := range r.Change.Keys {
		names = append(names, name)
	}
	slices.Sort(names)
	var sb strings.Builder
	for _, name := range names {
		v, err := json.Marshal(r.Change.Keys[name])
		if err != nil { // not from a stream record: a lane of its own
			return r.EventID
		}
		fmt.Fprintf(&sb, "%q=%s;", name, v)
	}
	return sb.String()
}

var (
	errInvalidImage  = errors.New("ddbstreams: invalid image")
	errInvalidRecord = errors.New("ddbstreams: invalid record")
)

// decode makes a Change of a stream record. Its errors name attributes and
// types, never values.
func decode[T any](r *events.DynamoDBEventRecord) (Change[T], error) {
	c := Change[T]{EventName: r.EventName, SequenceNumber: r.Change.SequenceNumber, EventID: r.EventID}
	var err error
	if c.Keys, err = AttributeValues(r.Change.Keys); err != nil {
		return c, fmt.Errorf("%w: keys: %w", errInvalidRecord, err)
	}
	if err := attributevalue.UnmarshalMap(c.Keys, &c.Key); err != nil {
		return c, fmt.Errorf("%w: keys: %w", errInvalidRecord, describe(err))
	}
	if c.OldImage, err = image[T](r.Change.OldImage); err != nil {
		return c, fmt.Errorf("%w: old image: %w", errInvalidImage, err)
	}
	if c.NewImage, err = image[T](r.Change.NewImage); err != nil {
		return c, fmt.Errorf("%w: new image: %w", errInvalidImage, err)
	}
	if c.NewImage != nil {
		if err := batch.Validate(c.NewImage); err != nil {
			return c, fmt.Errorf("%w: %w", errInvalidRecord, err)
		}
	}
	return c, nil
}

func image[T any](m map[string]events.DynamoDBAttributeValue) (*T, error) {
	if m == nil {
		return nil, nil
	}
	av, err := AttributeValues(m)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := attributevalue.UnmarshalMap(av, v); err != nil {
		return nil, describe(err)
	}
	return v, nil
}

// describe reduces an attributevalue error to the types involved: its
// messages may quote the value (a number that does not parse, say).
func describe(err error) error {
	var typ *attributevalue.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Errorf("cannot decode a %s into %v", typ.Value, typ.Type)
	}
	return fmt.Errorf("cannot decode (%T)", err)
}
