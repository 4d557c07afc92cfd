// Package kinesisbatch makes the records of an Amazon Kinesis Data Streams
// event source idempotent, one record at a time, in shard order, and tells
// Lambda where to resume the shard as a partial batch response.
//
//	engine := idempotent.New(store)
//	lambda.Start(kinesisbatch.Wrap(engine, recordPayment,
//		kinesisbatch.WithKey(func(p Payment) (string, error) { return p.PaymentID, nil })))
//
// Each record's data is decoded as JSON into the handler's type (WrapRecord
// hands over the events.KinesisEventRecord instead) and runs through the
// idempotent.Engine given to Wrap, one Do call per record, under its own key:
// by default the stream and the event ID (shard and sequence number), which
// stay the same when Lambda delivers the record again; WithKey or
// WithRecordKey key it on the business identifier a producer repeats when it
// puts the same record twice.
//
// # Order and partial batch responses
//
// Lambda checkpoints a shard at the lowest sequence number a response names
// and delivers that record and every later one again. So by default the
// batch runs one record at a time, in order, and stops at the first record
// that is not done: the response names it, the records before it are done,
// and it and the records after it come back in the next batch, where those
// that were already done are replayed from their records (one store read
// each) instead of running again. WithContinueOnFailure goes on past a
// failure (the response still names the first record not done);
// WithParallelism runs the records of different partition keys side by side,
// each partition key still in order. Records with the same key never run at
// the same time, in one batch or across lanes.
//
// What is reported for each kind of failure (an undecodable record, a
// validation failure, a key in progress elsewhere, a store error, ...), and
// the event source mapping settings this needs (ReportBatchItemFailures,
// bisect on error, bounded retries, an on-failure destination), are in one
// table in docs/streams.md of the repository. The function returned by Wrap
// never returns a Go error (that would retry the whole batch).
//
// Processing stops short of the invocation's deadline (by a tenth of the time
// left, at most 500 ms); records not started by then are not done.
//
// # Logging
//
// This package logs to the Engine's logger and reports every record to its
// outcome hooks, as package sqsbatch does: a record it cannot decode is
// reported as OutcomeRejected (idempotent.ErrInvalidPayload), the hook's
// context carries the record (RecordFromContext), and every line carries the
// record's "sequence_number", never its data or key.
//
// # Guarantees
//
// The guarantees are those of package idempotent, per record: while a
// record's entry lives, a duplicate does not run the handler again, except
// after a takeover of a crashed or timed-out owner. Idempotent is not
// exactly-once; pass idempotent.DownstreamKey(ctx) to external APIs. A
// wrapped handler is safe for concurrent use.
package kinesisbatch
