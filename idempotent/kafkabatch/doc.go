// Package kafkabatch makes the records of an Amazon MSK or self-managed
// Apache Kafka event source idempotent, one record at a time, in offset
// order within each topic-partition, and tells Lambda where to resume each
// partition as a partial batch response.
//
//	engine := idempotent.New(store)
//	lambda.Start(kafkabatch.Wrap(engine, recordPayment,
//		kafkabatch.WithKey(func(p Payment) (string, error) { return p.PaymentID, nil })))
//
// Each record's value (base64, as Lambda delivers it) is decoded as JSON into
// the handler's type (WrapRecord hands over the events.KafkaRecord instead)
// and runs through the idempotent.Engine given to Wrap, one Do call per
// record, under its own key: by default its topic, partition and offset,
// which stay the same when Lambda delivers the record again. WithKey keys it
// on the decoded value, WithRecordKey on the record (a header: see Header),
// to catch a producer that sent the same record twice. Offsets start again
// at 0 when a topic is deleted and created again: under the default key,
// records of the new topic would be taken for those of the old one while
// their entries live; key on a business identifier if that can happen.
//
// # Order and partial batch responses
//
// aws-lambda-go has no response type for Kafka: Wrap returns this package's
// Response, in the format AWS documents (see Response). For each
// topic-partition, Lambda resumes at the offset the response names and
// delivers that record and every later one of the partition again. So the
// records of a partition run one at a time, in offset order, and a partition
// stops at its first record that is not done; other partitions go on. The
// response names the first record not done of each partition that has one,
// and records already done are replayed on redelivery, not run again.
// WithContinueOnFailure goes on past a failure; WithParallelism runs
// partitions side by side. Records with the same idempotency key never run
// at the same time.
//
// Partial batch responses need an event source mapping in provisioned mode
// with ReportBatchItemFailures enabled. What is reported for each kind of
// failure, and those settings, are in one table in docs/streams.md of the
// repository. The function returned by Wrap never returns a Go error (that
// would retry the whole batch).
//
// # Logging
//
// As package sqsbatch: the Engine's logger and outcome hooks hear of every
// record, the hook's context carries the record (RecordFromContext), and
// every line carries its "topic", "partition" and "offset", never its key,
// value or headers.
//
// # Guarantees
//
// The guarantees are those of package idempotent, per record: while a
// record's entry lives, a duplicate does not run the handler again, except
// after a takeover of a crashed or timed-out owner. Idempotent is not
// exactly-once; pass idempotent.DownstreamKey(ctx) to external APIs. A
// wrapped handler is safe for concurrent use.
package kafkabatch
