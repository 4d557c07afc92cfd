// Package sqsbatch makes the messages of an Amazon SQS event source idempotent,
// each key's messages one at a time (a standard queue's keys side by side, a
// FIFO queue's groups in order), and reports the ones that failed as a
// partial batch response.
//
// Wrap turns a per-message handler into a Lambda handler for SQS batches:
//
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	engine := idempotent.New(store, idempotent.WithExpiry(24*time.Hour))
//	lambda.Start(sqsbatch.Wrap(engine, func(ctx context.Context, o Order) error {
//		return ship(ctx, o, idempotent.DownstreamKey(ctx))
//	}, sqsbatch.WithKey(func(o Order) (string, error) { return o.OrderID, nil })))
//
// Each body is decoded as JSON into the handler's message type; WrapMessage
// hands over the events.SQSMessage instead. Each message then runs through
// the idempotent.Engine given to Wrap, one engine call per message, under its
// own key (by default the SQS message ID; see WithKey), so a message that SQS
// delivers again, or that a producer sent twice, does not run the handler
// again while its record lives.
//
// # Options
//
// The core is configured once, by the options given to idempotent.New
// (prefix, expiry, leases, waiting, cache, logger, outcome hooks, optional
// keys), and every front door given that Engine shares them. This package's
// options are its own: the key, the payload to validate and the parallelism.
// They are plain values (sqsbatch.WithParallelism(4)); WithKey and
// WithPayloadValidation take a function of the handler's message type, and
// Wrap panics at start-up when it is another type. The batch sources
// kinesisbatch, kafkabatch and ddbstreams have the same options under the
// same names; their rules are documented here, on each option.
//
// # What counts as a failure
//
// The result lists in BatchItemFailures the message IDs that must be
// delivered again; every other message of the batch is deleted by Lambda.
//
// Not reported (deleted):
//   - the handler returned nil. This holds even when the record could not be
//     completed afterwards (the store failed): reporting the message would
//     re-run the handler for certain, while this way only a duplicate
//     arriving after the lease can (the failure is logged at error level).
//   - a duplicate of a key already processed, in this batch or an earlier one
//     (a replay), including a record completed without a response
//     (idempotent.ErrResponseNotStored): an SQS message needs none.
//
// Reported, and likely to succeed when retried:
//   - the handler returned an error or panicked (the record is released, so the
//     retry runs the handler again; a panic fails only its message);
//   - the key is in progress in another invocation (idempotent.ErrInProgress);
//   - the store failed before the handler ran (idempotent.ErrStore);
//   - the invocation's time was up before the message was started;
//   - on a FIFO queue, a message after a failed one of the same message group.
//
// Reported, and never going to succeed (poison messages): a body that is not
// JSON, is JSON null or does not decode into the message type; a Validate()
// error (when the message type or its pointer has that method); a key
// function error, an empty key (unless idempotent.WithOptionalKey) or an
// invalid key; the key reused with a different payload
// (idempotent.ErrPayloadMismatch); a corrupt or foreign record. These are
// reported rather than deleted so that they end, after the queue's
// maxReceiveCount, in its dead-letter queue, where someone sees them. None of
// them affects the other messages of the batch (except on a FIFO queue, its
// own message group).
//
// The function returned by Wrap never returns a Go error: an error would fail
// the whole batch, making Lambda redeliver the messages that succeeded along
// with the others. A batch whose context is already done reports every message
// as failed.
//
// # Payload validation
//
// By default a duplicate must carry the same payload as the message that
// created the record: the decoded message (fields the handler does not decode
// do not count) for Wrap, the raw body for WrapMessage. Under the default key
// this never fires, as SQS redelivers a message unchanged. Under a key taken
// from the body it catches a producer that reused a key for a different
// message, which would otherwise be silently dropped as a duplicate; the
// message is reported and ends in the dead-letter queue instead. Narrow what
// must match with WithPayloadValidation or turn it off with
// WithoutPayloadValidation.
//
// # Duplicates in one batch and parallelism
//
// Messages of one batch that share a key run one after another, never at the
// same time: the first runs the handler, the next ones find its completed
// record and are replayed (or, if it failed, run the handler themselves). If
// the first succeeded but its record could not be completed (a store error),
// the next ones find it still in progress under this invocation's own lease
// and count as done, rather than failing and being taken over, and run again,
// on redelivery. A standard queue keeps no order: by default up to 10 of its
// messages with different keys run side by side (the handler must be safe
// for concurrent use; WithParallelism(1) runs them one at a time, in batch
// order except that the messages of a key follow its first one). A FIFO
// queue's batch runs one message at a time by default, its message groups
// side by side with WithParallelism. Same-key messages always wait for each
// other.
//
// The records of a batch are claimed in one wave before any handler runs,
// and completed while the next handler runs (docs/streams.md, "Batches in
// waves").
//
// # FIFO queues
//
// A batch is from a FIFO queue when its messages' event source ARN ends in
// ".fifo" or they carry the MessageGroupId attribute. The messages of a group
// are processed in their order in the batch. After the first failure in a
// group, every later message of that group is reported as failed without being
// processed, as AWS asks of partial batch responses on FIFO queues, so that the
// group is retried in its original order. Other groups are not affected.
//
// # Configuring the event source
//
// Enable ReportBatchItemFailures (FunctionResponseTypes) on the event source
// mapping. Lambda reads batchItemFailures only when it is enabled. Without it
// the response is ignored, and since the function returns no error the
// invocation counts as a success: Lambda deletes every message of the batch,
// the failed ones included. They are lost: neither retried nor moved to the
// dead-letter queue. (An empty item identifier, which only a message without
// an ID would produce, makes Lambda treat the whole batch as failed.)
//
// Set the queue's visibility timeout to at least six times the function
// timeout (AWS's advice, which leaves room to retry throttled batches); it then
// also exceeds the idempotency lease (the invocation's deadline, capped by
// idempotent.WithMaxLease, plus a clock-skew margin). With a shorter one, SQS
// delivers a message again while its first delivery is still running; the
// duplicate finds the key in progress, is reported, and counts a receive.
//
// Configure a dead-letter queue and a maxReceiveCount that leaves room for
// such retries (AWS suggests at least 5 for Lambda). On a FIFO queue, the
// messages held back behind a failing message of their group are received, and
// counted, as often as it is, so they can reach the dead-letter queue with it;
// redrive them in order.
//
// # Time
//
// Processing stops short of the invocation's deadline (by a tenth of the time
// left, at most 500 ms) so that the response is returned before Lambda times
// the invocation out, which would fail the whole batch. Messages not started by
// then are reported; a running handler sees its context end first, as every
// handler of the core does (it ends before the record's lease).
//
// # Logging
//
// This package logs to the Engine's logger (idempotent.WithLogger, else
// slog.Default()), and its outcome hooks (idempotent.WithOutcomeHook) hear of
// every message: the core's outcomes, and OutcomeRejected, with an error
// wrapping idempotent.ErrInvalidPayload, for a message whose body cannot be
// decoded or fails Validate, which this package refuses before the core and
// reports to it. The hook's context carries the message (see
// MessageFromContext). Messages not started because the invocation's time ran
// out, or held back behind a failed message of their FIFO group, report no
// outcome: they did not run.
//
// Records of this package and of the core carry the SQS message ID as
// "message_id"; none carries a
// message body or an idempotency key. Decoding errors are reduced to byte
// offsets, field names and types. Errors returned by Validate and by the
// handler are logged as written, so keep secrets out of them.
//
// # Guarantees
//
// The guarantees are those of package idempotent, per message: while a
// message's record lives, a duplicate does not run the handler again, except
// after a takeover of a crashed or timed-out owner. Idempotent is not
// exactly-once; pass idempotent.DownstreamKey(ctx) to external APIs. A wrapped
// handler is safe for concurrent use.
package sqsbatch
