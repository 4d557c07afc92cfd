// Package rabbitmqbatch makes the messages of an Amazon MQ for RabbitMQ event
// source idempotent, one message at a time and in order within each queue,
// the queues of a batch side by side.
//
//	engine := idempotent.New(store)
//	lambda.Start(rabbitmqbatch.Wrap(engine, recordPayment))
//
// Each message's data (base64, as Lambda delivers it) is decoded as JSON into
// the handler's type and runs through the idempotent.Engine given to Wrap,
// one Do call per message, under its own key: by default its
// basicProperties.messageId, which the producer sets and the broker keeps
// when it delivers the message again. RabbitMQ gives a message no ID of its
// own: a message without one fails with ErrNoMessageID (it wraps
// idempotent.ErrMissingKey) rather than being keyed on something that
// changes between deliveries; have producers set it, or key on a business
// identifier with WithKey or WithRecordKey. The redelivered flag is a hint
// from the broker, never part of a key.
//
// # Order and failures
//
// Lambda has no partial batch response for Amazon MQ: when the function
// returns an error, the whole batch goes back to the broker, which delivers
// it again. So the messages of a queue run one at a time, in their order,
// and a queue stops at its first message that is not done (a handler error,
// an undecodable message, a key in progress elsewhere, ...): the later ones
// are not run, and their claims are given back. Then the function returns a
// *BatchError naming the message IDs not done (it matches ErrNotDone, and
// ErrNoMessageID when a message lacked one). On the redelivery the messages
// already done are replayed from their records, not run again, and only
// the others run. Messages with the same key never run at the same time.
// The queues of one batch are independent and run side by side (the handler
// must then be safe for concurrent use; WithParallelism(1) runs them in
// turn); an event source mapping of one queue gives batches of one queue.
//
// A message that can never succeed (undecodable, no message ID) fails its
// batch on every delivery: the broker's redelivery limit and dead-letter
// exchange must take it out (docs/streams.md of the repository, "Amazon MQ").
//
// # Logging
//
// As package sqsbatch: the Engine's logger and outcome hooks hear of every
// message, the hook's context carries the message (MessageFromContext), and
// every line carries its "message_id", never its data or headers.
//
// # Guarantees
//
// The guarantees are those of package idempotent, per message: while a
// message's record lives, a duplicate does not run the handler again, except
// after a takeover of a crashed or timed-out owner. Idempotent is not
// exactly-once; pass idempotent.DownstreamKey(ctx) to external APIs. A
// wrapped handler is safe for concurrent use.
package rabbitmqbatch
