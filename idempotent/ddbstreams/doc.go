// Package ddbstreams makes the records of an Amazon DynamoDB Streams event
// source idempotent, one record at a time, in shard order, and tells Lambda
// where to resume the shard as a partial batch response. The handler gets
// each change with its old and new images decoded into its item type by
// attributevalue.UnmarshalMap.
//
//	engine := idempotent.New(store)
//	lambda.Start(ddbstreams.Wrap(engine, func(ctx context.Context, c ddbstreams.Change[Payment]) error {
//		if c.EventName != ddbstreams.Insert {
//			return nil
//		}
//		return sendReceipt(ctx, *c.NewImage, idempotent.DownstreamKey(ctx))
//	}, ddbstreams.WithKey(func(c ddbstreams.Change[Payment]) (string, error) {
//		return c.Key.PaymentID, nil
//	})))
//
// Each record runs through the idempotent.Engine given to Wrap, one Do call
// per record, under its own key: by default its event ID, which stays the
// same when Lambda delivers the record again. WithKey keys it on the item
// instead (a payment ID, from Change.Key), to run the handler once per item,
// whatever changes follow: the later changes are then duplicates, done
// without running it.
//
// There is no payload validation by default, unlike the queue and Kafka
// sources: later changes of one item differ by nature, and validating them
// under a key on the item would make every MODIFY after the INSERT a payload
// mismatch, which stops the shard until its retries run out. Use
// WithPayloadValidation to ask for one.
//
// # Order and partial batch responses
//
// Lambda checkpoints a shard at the lowest sequence number a response names
// and delivers that record and every later one again. So by default the
// batch runs one record at a time, in order, and stops at the first record
// that is not done: the response names it, and the records after it come
// back in the next batch, where those already done are replayed, not run
// again. WithContinueOnFailure goes on past a failure; WithParallelism runs
// the records of different items (primary keys) side by side, each item
// still in order. Records with the same idempotency key never run at the
// same time.
//
// What is reported for each kind of failure (an image that does not decode,
// a validation failure of the new image, a key in progress elsewhere, a store
// error, ...), and the event source mapping settings this needs, are in one
// table in docs/streams.md of the repository. The function returned by Wrap
// never returns a Go error (that would retry the whole batch).
//
// AttributeValue and AttributeValues convert aws-lambda-go's attribute
// values to the SDK's types, for handlers that need the raw images (see
// RecordFromContext).
//
// # Logging
//
// As package sqsbatch: the Engine's logger and outcome hooks hear of every
// record, the hook's context carries the record (RecordFromContext), and
// every line carries the record's "sequence_number", never an image or key.
//
// # Guarantees
//
// The guarantees are those of package idempotent, per record: while a
// record's entry lives, a duplicate does not run the handler again, except
// after a takeover of a crashed or timed-out owner. Idempotent is not
// exactly-once; pass idempotent.DownstreamKey(ctx) to external APIs. A
// wrapped handler is safe for concurrent use.
package ddbstreams
