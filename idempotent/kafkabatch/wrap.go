package kafkabatch

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// Wrap returns a Lambda handler for Kafka batches (Amazon MSK or
// self-managed Apache Kafka) that decodes each record's value (base64, as
// Lambda delivers it) as JSON into T and calls handle once per idempotency
// key, through e, in offset order within each topic-partition, reporting
// where each partition must be read again as a partial batch response. e's
// store keeps the records, and its settings apply. The event source mapping
// must be in provisioned mode and enable ReportBatchItemFailures (see the
// package documentation).
//
// A value that is not base64 or JSON, is JSON null or empty (a tombstone),
// does not decode into T, or, when T or *T has a method Validate() error,
// fails validation, makes its record a failure without calling handle.
//
// Wrap panics if e or handle is nil, or if an option's function takes
// another type than the handler's (see Option).
func Wrap[T any](e *idempotent.Engine, handle func(ctx context.Context, value T) error, opts ...Option) func(context.Context, events.KafkaEvent) (Response, error) {
	if handle == nil {
		panic("kafkabatch: Wrap: nil handler")
	}
	payload := func(_ *events.KafkaRecord, v T) (any, error) { return v, nil }
	return newBatcher(e, "Wrap", handle, decodeJSON[T], payload, opts).handleBatch
}

// WrapRecord is Wrap for handlers that take the Kafka record itself, for
// values that are not JSON (or tombstones) or are decoded by the handler.
// Its default payload validation compares the raw value and key.
func WrapRecord(e *idempotent.Engine, handle func(ctx context.Context, rec events.KafkaRecord) error, opts ...Option) func(context.Context, events.KafkaEvent) (Response, error) {
	if handle == nil {
		panic("kafkabatch: WrapRecord: nil handler")
	}
	decode := func(r *events.KafkaRecord) (events.KafkaRecord, error) { return *r, nil }
	payload := func(r *events.KafkaRecord, _ events.KafkaRecord) (any, error) {
		return [2]string{r.Key, r.Value}, nil
	}
	return newBatcher(e, "WrapRecord", handle, decode, payload, opts).handleBatch
}

// RecordFromContext returns the Kafka record being processed. It is set in
// the context of a wrapped handler and of the Engine's outcome hooks
// (idempotent.WithOutcomeHook) when they are told of a record's outcome.
func RecordFromContext(ctx context.Context) (events.KafkaRecord, bool) {
	if r, ok := ctx.Value(recordKey{}).(*events.KafkaRecord); ok {
		return *r, true
	}
	return events.KafkaRecord{}, false
}

type recordKey struct{}

// Header returns the value of the record's first header named name.
func Header(r events.KafkaRecord, name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if v, ok := h[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type batcher[T any] struct {
	p    *batch.Processor[events.KafkaRecord, T]
	stop bool
}

func newBatcher[T any](e *idempotent.Engine, wrap string, handle func(context.Context, T) error, decode func(*events.KafkaRecord) (T, error), defaultPayload func(*events.KafkaRecord, T) (any, error), opts []Option) *batcher[T] {
	src := batch.Source[events.KafkaRecord, T]{
		Name:    "kafkabatch",
		Noun:    "record",
		Handle:  handle,
		Decode:  decode,
		Key:     defaultKey[T],
		Payload: defaultPayload,
		// The topic-partition and offset tie the Engine's lines (they know
		// only the hashed record ID) to a batch item failure.
		Attrs: func(r *events.KafkaRecord) []slog.Attr {
			return []slog.Attr{slog.String("topic", r.Topic), slog.Int64("partition", r.Partition), slog.Int64("offset", r.Offset)}
		},
		Context: func(ctx context.Context, r *events.KafkaRecord) context.Context {
			return context.WithValue(ctx, recordKey{}, r)
		},
	}
	o := batch.Apply(opts)
	return &batcher[T]{p: batch.New(e, wrap, src, o), stop: !o.Continue()}
}

// defaultKey is what stays the same when Lambda delivers a record again: its
// topic, partition and offset ('/' cannot occur in a topic name).
func defaultKey[T any](r *events.KafkaRecord, _ T) (string, error) {
	return r.Topic + "/" + strconv.FormatInt(r.Partition, 10) + "/" + strconv.FormatInt(r.Offset, 10), nil
}

// handleBatch processes one Kafka event. It never returns an error: an error
// would make Lambda retry the whole batch, the records done included.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.KafkaEvent) (Response, error) {
	resp := Response{BatchItemFailures: []BatchItemFailure{}}
	// The records map has no order: partitions are taken in key order, the
	// records of each in offset order.
	var recs []events.KafkaRecord
	var parts []string // the records map key of each record
	for _, part := range slices.Sorted(maps.Keys(ev.Records)) {
		rs := slices.Clone(ev.Records[part])
		slices.SortStableFunc(rs, func(a, b events.KafkaRecord) int { return cmp.Compare(a.Offset, b.Offset) })
		recs = append(recs, rs...)
		for range rs {
			parts = append(parts, part)
		}
	}
	if len(recs) == 0 {
		return resp, nil
	}
	order := batch.Order{Stop: b.stop, LaneNoun: "partition", Lane: func(i int, _ string) string { return "tp:" + parts[i] }}
	results := b.p.Run(ctx, recs, order)
	for _, i := range batch.Checkpoints(results, func(i int) string { return parts[i] }) {
		resp.BatchItemFailures = append(resp.BatchItemFailures,
			BatchItemFailure{ItemIdentifier: ItemIdentifier{Partition: parts[i], Offset: recs[i].Offset}})
	}
	return resp, nil
}

var (
	errInvalidValue  = errors.New("kafkabatch: invalid record value")
	errInvalidRecord = errors.New("kafkabatch: invalid record")
)

// decodeJSON decodes a record's value into T and validates it (see
// batch.DecodeJSON: its errors never quote the value).
func decodeJSON[T any](r *events.KafkaRecord) (T, error) {
	data, err := base64.StdEncoding.DecodeString(r.Value)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%w: not base64", errInvalidValue)
	}
	return batch.DecodeJSON[T](data, errInvalidValue, errInvalidRecord)
}
