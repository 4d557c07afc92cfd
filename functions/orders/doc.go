// Package orders is the sample orders consumer: a Lambda function behind an
// SQS queue that reserves stock for each order, made idempotent per order
// with [sqsbatch.Wrap] over any [storage.Store] (DynamoDB in the deployed
// stack). Its main package, cmd/bootstrap, is what the stack deploys.
//
// A message body is an [Order]:
//
//	{"orderId": "order-1001", "sku": "SKU-RED-MUG", "quantity": 2}
//
// The idempotency key is the orderId, not the SQS message ID: a producer
// that retries SendMessage creates a new message for the same order, and
// only keying on the order makes that a duplicate. A duplicate in the same
// batch waits for its original and is then answered from its record; a
// redelivery later is answered from the record too. Either way the side
// effect, an UpdateItem ADD reserved :quantity on the order's SKU in the
// inventory table, runs once per order (and, conditioned on a token of the
// order, applies once even when it runs again: see below).
//
// A body that is not JSON, does not decode into an Order or fails
// [Order.Validate] is a poison message: it is logged with its message ID and
// reported in the partial batch response (batchItemFailures), the other
// messages are processed, and after the queue's maxReceiveCount SQS moves it
// to the dead-letter queue. A failed reservation is reported the same way
// and its key released, so the redelivery runs it again. The event source
// mapping must enable ReportBatchItemFailures, or failed messages would be
// deleted with the batch.
//
// Idempotent is not exactly-once: an invocation that crashes after the
// UpdateItem and before its record is completed leaves the key in progress
// until its lease ends, and the redelivery that takes it over runs the
// handler again; so does the redelivery of a message whose write landed but
// answered an error (its key was released). The reservation itself is
// therefore conditional on a token derived from [idempotent.DownstreamKey],
// the same for every run of an order: a repeated write finds its token and
// reserves nothing more.
//
// The handler returned by [New] is safe for concurrent use.
package orders
