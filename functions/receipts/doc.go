// Package receipts is the sample receipts function: a Lambda function on the
// DynamoDB stream of the payments table (the ledger functions/payments
// writes) that sends one receipt per payment, made idempotent per payment
// with [ddbstreams.Wrap] over any [storage.Store] that records steps
// (DynamoDB in the deployed stack). Its main package, cmd/bootstrap, is what
// the stack deploys.
//
// Each record's change is decoded into a [Payment] (the ledger item) and
// keyed by its payment ID ([Key]), not by the record's event ID: the item's
// later changes (a refund) are then duplicates too, and send nothing. An
// INSERT sends the receipt through a [Mailer] inside the step [StepSend],
// whose downstream key ([idempotent.DownstreamKey]) the mailer gets as the
// send's idempotency key. [LocalMailer] is a mailer in memory that honours
// keys and counts sends; the deployed sample logs each receipt through it
// instead of e-mailing anyone.
//
// # Failures and redelivery
//
// A stream redelivers more than a queue: Lambda checkpoints the shard at the
// first record the partial batch response names and delivers it and every
// later record again. A failed send is reported that way (the entry is given
// back, the redelivery sends again); the records done before and after it
// are replayed from their entries when they come back, never sent again.
// Payments run [Parallelism] at a time, each payment's records in order. A
// new image that fails [Payment.Validate], an INSERT without a new image
// ([ErrNoImage]), and a payment in progress in another invocation are
// reported too; docs/streams.md has the table. The event source mapping
// must enable ReportBatchItemFailures, bisect on error, and bound its
// retries, with an on-failure destination (the stack's does).
//
// Order matters: keyed by the payment, a change processed before the
// payment's INSERT would take the payment's key and send nothing. Lambda
// delivers a shard in order and ddbstreams keeps each item's records in
// order, so that does not happen on a stream; the stack's event source
// mapping passes only INSERTs anyway.
//
// # Guarantees
//
// While a payment's entry lives ([Expiry], longer than the stream keeps a
// record), a delivery of any of its records does not send again, except
// after a takeover of a crashed or timed-out owner, which runs the handler
// again by design: the send step's record, or else the mailer's key, makes
// that run send nothing more. Idempotent is not exactly-once: a mailer that
// ignores keys can send twice after a crash inside the send.
//
// The handler returned by [New] is safe for concurrent use.
package receipts
