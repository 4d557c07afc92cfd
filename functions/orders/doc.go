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
// redelivery later is answered from the record too.
//
// # The reservation
//
// An order takes its quantity from its SKU's stock and adds it to the SKU's
// reserved count: one UpdateItem-shaped write on the inventory table
// (SET stock = stock - :qty ADD reserved :qty), conditioned on
// stock >= :qty. Over a dynamostore.Store (the deployed function) the write
// is added to the completion's transaction ([dynamostore.Transaction]): the
// reservation and the order's completed record commit in one
// TransactWriteItems, fenced on the run's lease, or neither does. So the
// reservation applies once while the record lives, a run that loses its
// lease or dies reserves nothing (the run that takes over reserves), and a
// completed order is never re-reserved by a redelivery.
//
// An order the stock does not cover (or whose SKU has no stock) commits
// nothing: no stock taken, no completion; its record is released, as after
// any handler error, and the message is reported as a batch item failure.
// SQS redelivers it after the visibility timeout, so stock added meanwhile
// lets it through; after the queue's maxReceiveCount (5 in the sample stack)
// SQS moves it to the dead-letter queue, so a condition that keeps failing
// never loops. The logs carry the cancellation (a
// *dynamostore.TxCanceledError naming the inventory item and
// ConditionalCheckFailed). The decision to retry rather than complete the
// order as rejected is the sample's: a rejection would need a read before
// the write, or a completion the failed transaction cannot carry.
//
// Over a store without transactions (the memory store of tests) the
// reservation is an UpdateItem of its own that also adds a token of the
// order ([idempotent.DownstreamKey]) and is conditioned on its absence, so a
// write repeated after a takeover or a redelivery applies once; the stock
// condition failing there is [ErrOutOfStock].
//
// A body that is not JSON, does not decode into an Order or fails
// [Order.Validate] is a poison message: it is logged with its message ID and
// reported in the partial batch response (batchItemFailures), the other
// messages are processed, and after the queue's maxReceiveCount SQS moves it
// to the dead-letter queue. The event source mapping must enable
// ReportBatchItemFailures, or failed messages would be deleted with the
// batch.
//
// The handler returned by [New] is safe for concurrent use.
package orders
