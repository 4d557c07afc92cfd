package kinesisbatch

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// Wrap returns a Lambda handler for Kinesis batches that decodes each
// record's data as JSON into T and calls handle once per idempotency key,
// through e, in the order of the shard, reporting where the shard must be
// read again as a partial batch response. e's store keeps the records, and
// its settings (prefix, expiry, logger, outcome hooks, optional keys) apply.
// The event source mapping must enable ReportBatchItemFailures (see the
// package documentation).
//
// Data that is not JSON, is JSON null, does not decode into T, or, when T or
// *T has a method Validate() error, fails validation, makes its record a
// failure without calling handle.
//
// Wrap panics if e or handle is nil, or if an option's function takes
// another type than the handler's (see Option).
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, rec T) error, opts ...Option) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	if handle == nil {
		panic("kinesisbatch: Wrap: nil handler")
	}
	payload := func(_ *events.KinesisEventRecord, v T) (any, error) { return v, nil }
	return newBatcher(e, "Wrap", handle, decodeJSON[T], payload, opts).handleBatch
}

// WrapRecord is Wrap for handlers that take the Kinesis record itself, for
// data that is not JSON or is decoded by the handler. Its default payload
// validation compares the raw data.
func WrapRecord(e *idempotent.Engine, handle func(ctx context.Context, rec events.KinesisEventRecord) error, opts ...Option) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	if handle == nil {
		panic("kinesisbatch: WrapRecord: nil handler")
	}
	decode := func(r *events.KinesisEventRecord) (events.KinesisEventRecord, error) { return *r, nil }
	payload := func(r *events.KinesisEventRecord, _ events.KinesisEventRecord) (any, error) {
		return r.Kinesis.Data, nil
	}
	return newBatcher(e, "WrapRecord", handle, decode, payload, opts).handleBatch
}

// RecordFromContext returns the Kinesis record being processed. It is set in
// the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a record's outcome.
func RecordFromContext(ctx context.Context) (events.KinesisEventRecord, bool) {
	if r, ok := ctx.Value(recordKey{}).(*events.KinesisEventRecord); ok {
		return *r, true
	}
	return events.KinesisEventRecord{}, false
}

type recordKey struct{}

// batcher processes Kinesis batches with one engine call per record.
type batcher[T any] struct {
	p        *batch.Processor[events.KinesisEventRecord, T]
	parallel bool // lanes per partition key
	stop     bool
}

func newBatcher[T any](e *idempotent.Engine, wrap string, handle func(context.Context, T) error, decode func(*events.KinesisEventRecord) (T, error), defaultPayload func(*events.KinesisEventRecord, T) (any, error), opts []Option) *batcher[T] {
	src := batch.Source[events.KinesisEventRecord, T]{
		Name:    "kinesisbatch",
		Noun:    "record",
		Handle:  handle,
		Decode:  decode,
		Key:     defaultKey[T],
		Payload: defaultPayload,
		// The sequence number ties the Engine's lines (they know only the
		// hashed record ID) to a batch item failure.
		Attrs: func(r *events.KinesisEventRecord) []slog.Attr {
			return []slog.Attr{slog.String("sequence_number", r.Kinesis.SequenceNumber)}
		},
		Context: func(ctx context.Context, r *events.KinesisEventRecord) context.Context {
			return context.WithValue(ctx, recordKey{}, r)
		},
	}
	o := batch.Apply(opts)
	return &batcher[T]{p: batch.New(e, wrap, src, o), parallel: o.Parallelism() > 1, stop: !o.Continue()}
}

// defaultKey is what stays the same when Lambda delivers a record again:
// its stream and its event ID (the shard and the sequence number).
func defaultKey[T any](r *events.KinesisEventRecord, _ T) (string, error) {
	if r.EventID == "" {
		return "", nil
	}
	return r.EventSourceArn + "/" + r.EventID, nil
}

// shardOf is the checkpoint unit of a record: its stream and shard (the
// event ID is "shardId-000000000003:<sequence number>").
func shardOf(r *events.KinesisEventRecord) string {
	shard, _, _ := strings.Cut(r.EventID, ":")
	return r.EventSourceArn + "/" + shard
}

// handleBatch processes one Kinesis event. It never returns an error: an
// error would make Lambda retry the whole batch, the records done included.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	resp := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
	if len(ev.Records) == 0 {
		return resp, nil
	}
	recs := ev.Records
	order := batch.Order{Stop: b.stop, LaneNoun: "shard",
		Lane: func(i int, _ string) string { return "shard:" + shardOf(&recs[i]) }}
	if b.parallel {
		order.LaneNoun = "partition key"
		order.Lane = func(i int, _ string) string {
			return "pk:" + shardOf(&recs[i]) + "\x00" + recs[i].Kinesis.PartitionKey
		}
	}
	results := b.p.Run(ctx, recs, order)
	for _, i := range batch.Checkpoints(results, func(i int) string { return shardOf(&recs[i]) }) {
		resp.BatchItemFailures = append(resp.BatchItemFailures,
			events.KinesisBatchItemFailure{ItemIdentifier: recs[i].Kinesis.SequenceNumber})
	}
	return resp, nil
}

var (
	errInvalidData   = errors.New("kinesisbatch: invalid record data")
	errInvalidRecord = errors.New("kinesisbatch: invalid record")
)

// decodeJSON decodes a record's data into T and validates it (see
// batch.DecodeJSON: its errors never quote the data).
func decodeJSON[T any](r *events.KinesisEventRecord) (T, error) {
	return batch.DecodeJSON[T](r.Kinesis.Data, errInvalidData, errInvalidRecord)
}
