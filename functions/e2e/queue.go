package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// QueueSender puts message bodies on the orders queue. Delivery to the
// orders function may happen later (a real queue) or before it returns
// (LocalQueue); the suite polls the inventory table either way.
type QueueSender func(ctx context.Context, bodies []string) error

// LocalQueue stands in for an SQS queue and its Lambda event source mapping
// with ReportBatchItemFailures, in process: it delivers bodies to the orders
// function in batches of up to BatchSize, and redelivers each message the
// function reports failed (same message id and body, receive count + 1)
// until it succeeds or has been received MaxReceives times, when it goes to
// the dead-letter list. Send returns once every message is settled.
type LocalQueue struct {
	// Orders invokes the orders function.
	Orders Invoker
	// BatchSize is the most messages per invocation; 10 when zero.
	BatchSize int
	// MaxReceives is the dead-letter queue's maxReceiveCount; 5 when zero.
	MaxReceives int

	mu   sync.Mutex
	next int
	dead []events.SQSMessage
}

// Send implements QueueSender.
func (q *LocalQueue) Send(ctx context.Context, bodies []string) error {
	batchSize, maxReceives := q.BatchSize, q.MaxReceives
	if batchSize <= 0 {
		batchSize = 10 // the most SQS delivers per batch
	}
	if maxReceives <= 0 {
		maxReceives = 5
	}
	sent := strconv.FormatInt(time.Now().UnixMilli(), 10)
	pending := make([]events.SQSMessage, len(bodies))
	q.mu.Lock()
	for i, b := range bodies {
		q.next++
		pending[i] = events.SQSMessage{
			MessageId:      fmt.Sprintf("local-%08d", q.next),
			ReceiptHandle:  fmt.Sprintf("receipt-%08d", q.next),
			Body:           b,
			EventSource:    "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:local-orders",
			AWSRegion:      "us-east-1",
		}
	}
	q.mu.Unlock()

	receives := make(map[string]int, len(pending))

	for len(pending) > 0 {
		var retry []events.SQSMessage
		for start := 0; start < len(pending); start += batchSize {
			batch := pending[start:min(start+batchSize, len(pending))]
			for i := range batch {
				receives[batch[i].MessageId]++
				batch[i].Attributes = map[string]string{
					"ApproximateReceiveCount": strconv.Itoa(receives[batch[i].MessageId]), "SentTimestamp": sent,
				}
			}
			failed, err := q.deliver(ctx, batch)
			if err != nil {
				return err
			}
			for _, m := range batch {
				if !failed[m.MessageId] {
					continue
				}
				if receives[m.MessageId] >= maxReceives {
					q.mu.Lock()
					q.dead = append(q.dead, m)
					q.mu.Unlock()
					continue
				}
				retry = append(retry, m)
			}
		}
		pending = retry
	}
	return nil
}

// deliver invokes the function with one batch and returns the ids it
// reported failed. A function error fails the whole batch, as the event
// source mapping treats it.
func (q *LocalQueue) deliver(ctx context.Context, batch []events.SQSMessage) (map[string]bool, error) {
	event, err := json.Marshal(events.SQSEvent{Records: batch})
	if err != nil {
		return nil, err
	}
	failed := make(map[string]bool)
	out, err := q.Orders(ctx, event)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		for _, m := range batch {
			failed[m.MessageId] = true
		}
		return failed, nil
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("e2e: orders answered %.200s: %w", out, err)
	}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// DeadLetters returns the bodies of the messages that went to the
// dead-letter list, in the order they went there.
func (q *LocalQueue) DeadLetters() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	bodies := make([]string, len(q.dead))
	for i, m := range q.dead {
		bodies[i] = m.Body
	}
	return bodies
}
