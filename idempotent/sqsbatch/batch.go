package sqsbatch

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// handleBatch processes one SQS event. It never returns an error: a failed
// message is reported in the response, and an error would fail (and redeliver)
// every message of the batch, the processed ones included.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	if len(ev.Records) == 0 {
		return resp, nil
	}
	results := b.p.Run(ctx, ev.Records, sqsOrder(ev.Records))
	reported := make(map[string]bool)
	for _, i := range batch.NotDone(results) {
		id := ev.Records[i].MessageId
		if !reported[id] {
			reported[id] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
	}
	return resp, nil
}

// sqsOrder is the order of a batch. On a standard queue a lane holds the
// messages of one key, so a duplicate in the batch runs after its original
// has finished and is answered from its record, and a failure stops nothing.
// On a FIFO queue a lane is a message group, stopped by its first failure.
func sqsOrder(msgs []events.SQSMessage) batch.Order {
	for i := range msgs {
		if isFIFO(&msgs[i]) {
			return batch.Order{
				Lane:     func(i int, _ string) string { return "group:" + msgs[i].Attributes["MessageGroupId"] },
				Stop:     true,
				LaneNoun: "message group",
			}
		}
	}
	return batch.Order{Lane: func(_ int, key string) string {
		if key == "" { // a message without a usable key is on its own
			return ""
		}
		return "key:" + key
	}, Parallelism: defaultParallelism}
}

// defaultParallelism is how many messages of a standard queue's batch run at
// once by default: a standard queue keeps no order, so nothing is gained by
// running its messages one by one (Powertools' batch processors run them
// all at once). It is the default batch size of an SQS event source mapping.
const defaultParallelism = 10

func isFIFO(m *events.SQSMessage) bool {
	return strings.HasSuffix(m.EventSourceARN, ".fifo") || m.Attributes["MessageGroupId"] != ""
}
