// Package activemqbatch makes the messages of an Amazon MQ for ActiveMQ event
// source idempotent, one message at a time, in batch order.
//
//	engine := idempotent.New(store)
//	lambda.Start(activemqbatch.Wrap(engine, recordPayment))
//
// Each message's data (base64, as Lambda delivers it) is decoded as JSON into
// the handler's type and runs through the idempotent.Engine given to Wrap,
// one Do call per message, under its own key: by default its JMS messageID,
// which stays the same when the broker delivers the message again. A
// producer that sends the same message twice gives it two IDs: key on a
// business identifier with WithKey or WithRecordKey to catch that. A message
// without a messageID fails with ErrNoMessageID (it wraps
// idempotent.ErrMissingKey). The redelivered flag is a hint from the broker,
// never part of a key.
//
// # Order and failures
//
// Lambda has no partial batch response for Amazon MQ: when the function
// returns an error, the whole batch goes back to the broker, which delivers
// it again. So the messages run one at a time, in batch order (one lane per
// destination; an event source mapping reads one queue), and stop at the
// first message that is not done (a handler error, an undecodable message,
// a key in progress elsewhere, ...): the later ones are not run, and their
// claims are given back. Then the function returns a *BatchError naming the
// message IDs not done (it matches ErrNotDone). On the redelivery the
// messages already done are replayed from their records, not run again,
// and only the others run. Messages with the same key never run at the
// same time.
//
// A message that can never succeed (undecodable) fails its batch on every
// delivery: the broker's redelivery policy and dead-letter queue must take
// it out (docs/streams.md of the repository, "Amazon MQ").
//
// # Logging
//
// As package sqsbatch: the Engine's logger and outcome hooks hear of every
// message, the hook's context carries the message (MessageFromContext), and
// every line carries its "message_id", never its data or properties.
//
// # Guarantees
//
// The guarantees are those of package idempotent, per message: while a
// message's record lives, a duplicate does not run the handler again, except
// after a takeover of a crashed or timed-out owner. Idempotent is not
// exactly-once; pass idempotent.DownstreamKey(ctx) to external APIs. A
// wrapped handler is safe for concurrent use.
package activemqbatch
