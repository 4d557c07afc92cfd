// Package dynamostore is the DynamoDB [storage.Store]: one item per
// idempotency key, claimed with a conditional write, completed, released and
// added to (the handler's finished steps) under a fencing lease token. It
// uses aws-sdk-go-v2.
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	lambda.Start(idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(orderID)))
//
// A Store is safe for concurrent use. Create it once, outside the handler.
//
// # Calls per operation
//
//   - Claim: one PutItem of the whole new record, with the condition
//     attribute_not_exists(#id) OR #lease = :lease OR #expiration < :now OR
//     (#status = :inprogress AND #in_progress_expiration < :now_ms AND
//     #version = :record_version AND attribute_exists(#lease) AND
//     attribute_not_exists(#steps) AND <payload compatible>),
//     ReturnValues=ALL_OLD (the replaced item tells a takeover from a resume
//     of a suspended record) and ReturnValuesOnConditionCheckFailure=ALL_OLD
//     (the live item that refused the claim comes back with the failure, so
//     a duplicate costs one call). A consistent GetItem follows only if a
//     server refuses without returning the item; if the item has vanished by
//     then, the claim is tried once more. One rare case costs a second call:
//     a lapsed record that holds steps fails the condition (the PutItem would
//     drop them), and is replaced by a second PutItem of the new record,
//     conditioned on the record being exactly as read (#lease, #status,
//     #expiration and #in_progress_expiration as read): with its steps when
//     the claim resumes it (the same payload; then also
//     size(#steps) = :as_read, so a step its lapsed owner appends meanwhile
//     is not lost), without them otherwise. If the record changed meanwhile,
//     the claim is decided again on it. An expired record's steps die with
//     it: the claim alone replaces it.
//   - Complete: one UpdateItem
//     SET #status = :completed, #data = :data, #expiration = :exp
//     (and #trace = :trace when the call was traced, else REMOVE #trace)
//     REMOVE #in_progress_expiration, #steps, #suspended, conditioned on
//     #lease = :lease alone, so a retried completion succeeds again. An item
//     larger than Options.MaxItemBytes is refused before the call.
//   - AppendStep: one UpdateItem
//     SET #steps = list_append(if_not_exists(#steps, :empty), :step),
//     conditioned on #lease = :lease AND #status = :inprogress. A step past
//     the item limit is refused without writing (see Options.MaxItemBytes).
//   - Suspend: one UpdateItem
//     SET #in_progress_expiration = :end, #suspended = true, conditioned on
//     #lease = :lease AND #status = :inprogress.
//   - Release: one DeleteItem conditioned on
//     attribute_not_exists(#id) OR #lease = :lease, so an item that is already
//     gone counts as released.
//   - ClaimMany (storage.ClaimManyStore, a batch's claims): one Claim per
//     record, concurrently, at most Options.ClaimManyConcurrency in flight
//     (DynamoDB has no conditional batch write): N records cost N calls, in
//     about N / ClaimManyConcurrency round trips of time.
//   - A batch's completions and give-backs: no storage.FinishManyStore,
//     since many completions would cost as many UpdateItems anyway; the
//     engine sends each as soon as it is due (see idempotent.Batch).
//   - Commit of a handler's transaction (see below): one TransactWriteItems
//     holding the completion (Complete's update, conditioned on
//     #lease = :lease AND #status = :inprogress) and the handler's items; a
//     plain Complete when the handler added none.
//
// A conditional failure of Complete, Release, AppendStep or Suspend means
// another invocation took the lease over (or the record completed, or is
// gone: not an error for Suspend and Release); it is reported as
// [storage.ErrLeaseLost] and nothing is written. A claim retried by the SDK
// after a lost response finds its own lease token, which the condition
// admits: the claim was in fact made. A second write retried so fails its
// condition on the record it wrote, which carries its lease: made too.
//
// Every conditional write (the claim, its second PutItem, Complete,
// Release, AppendStep, Suspend, and the operator's Delete) asks for the
// stored item with a failed condition (ReturnValuesOnConditionCheckFailure=
// ALL_OLD) and decides on it, at no extra call. Some DynamoDB-compatible
// servers ignore that parameter: when a failure comes without the item, the
// store reads it with one consistent GetItem and decides exactly as if it
// had come with the failure. With DynamoDB itself this read happens only
// when a fenced write finds the record gone, which the failure alone cannot
// tell from such a server.
//
// # Transactions
//
// A Store is a storage.TxStore: a handler's own writes can commit with its
// completion. Inside a handler run by an idempotent front door,
// [Transaction] returns the run's [Tx], and [Tx.Add] adds
// types.TransactWriteItem values (Put, Update, Delete, ConditionCheck on
// any table of the account and region). When the handler returns, the
// completion and the items go in one TransactWriteItems: all commit, or
// none. A stale owner whose lease was taken over commits nothing (its
// caller gets idempotent.ErrInProgress); a failed condition of an item
// commits nothing and releases the record (a [*TxCanceledError], wrapping
// idempotent.ErrTxAborted, names the item and the reason); DynamoDB's
// limits (MaxTransactActions, MaxTransactBytes, one action per item) are
// checked before any call ([ErrTxLimit]). The ClientRequestToken is
// derived from the record, the lease and the completion, so the SDK's
// retry after a lost response applies once. What becomes exactly-once is
// these writes, while the record lives; calls to other systems are not
// (use idempotent.DownstreamKey and steps). A resumed run adds its writes
// again: the earlier run's never committed. See docs/transactions.md.
//
// The client must be a [TxClient] (*dynamodb.Client is). Transactional
// writes cost twice the capacity of plain ones (docs/provisioning.md).
//
// # Item layout
//
// With the default attribute names (all configurable through [Options]):
//
//	id                      S  partition key: the record ID "<prefix>#<sha256 hex>"
//	status                  S  INPROGRESS or COMPLETED
//	expiration              N  epoch seconds; the table's TTL attribute
//	in_progress_expiration  N  epoch milliseconds: when an INPROGRESS lease may be taken over
//	lease                   S  the owner's random token, fencing completion and release
//	validation              S  payload fingerprint (absent when not validated)
//	data                    B  the stored response (absent while in progress)
//	version                 N  record format version (storage.RecordVersion)
//	steps                   L  finished steps while in progress, in order: maps
//	                           {name: S, data: B} (data absent when empty);
//	                           removed on completion, absent when there are none
//	suspended               BOOL  true once the owner suspended the record after
//	                           its work failed (Store.Suspend); removed by the
//	                           next claim (a resume) and by completion, absent
//	                           otherwise
//	trace                   S  the W3C traceparent of the call that completed the
//	                           record, when it was traced (storage.Record.Trace);
//	                           absent otherwise
//
// With Options.SortKeyAttr set (a table shared with other data, or a table
// whose key schema is fixed), the partition key holds the constant
// Options.StaticPartitionKey and the sort key holds the record ID.
//
// Records are read strictly: a missing attribute, a wrong type or an
// unparsable number is reported as [idempotent.ErrCorruptRecord] naming the
// attribute. An item without a version attribute decodes with Version 0,
// which the wrapper refuses as foreign, and a claim never takes it (or one of
// another version) over: it is replaced only once it expires. An item
// without a suspended attribute, such as every item written before it
// existed, reads as not suspended; the record format version did not change
// for it. Either way such an item is never
// replayed; an item written by another tool (a Powertools record has no
// lease) is reported as corrupt. Once expired, it is claimed over like any
// other.
//
// # Table and permissions
//
// The table needs a partition key id of type S (and, in the composite layout,
// a sort key of type S), and TTL enabled on expiration so DynamoDB deletes
// expired records; the claim condition checks expiration itself, because
// TTL deletion can lag by days. On-demand capacity suits bursty Lambda traffic.
//
// The function's role needs dynamodb:PutItem (claim), dynamodb:UpdateItem
// (complete, steps, suspend), dynamodb:DeleteItem (release) and
// dynamodb:GetItem (the fallback read only) on the table. A handler's
// transaction needs no dynamodb:TransactWriteItems (IAM has no such
// action): each item needs its own action on its table (PutItem,
// UpdateItem, DeleteItem, ConditionCheckItem).
//
// # Global tables
//
// DynamoDB checks conditional writes per region: two invocations in two
// regions can both claim the same key before replication reconciles
// (last writer wins). Keep one home region per key: route every invocation for
// a key to the same region, or use a table that is not global.
//
// # Testing without AWS
//
// DynamoDB Local and LocalStack support everything the store uses. DynamoDB
// Local's error responses lack the CRC32 header the SDK checks, so set
// dynamodb.Options.DisableValidateResponseChecksum on clients that talk to it.
package dynamostore
