// Package dynamostore is the DynamoDB [storage.Store]: one item per
// idempotency key, claimed with a conditional write, completed and released
// under a fencing lease token. It uses aws-sdk-go-v2.
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	lambda.Start(idempotent.Wrap(store, handler, idempotent.WithKey(orderID)))
//
// A Store is safe for concurrent use. Create it once, outside the handler.
//
// # Calls per operation
//
//   - Claim: one PutItem with the condition
//     attribute_not_exists(#id) OR #expiration < :now OR
//     (#status = :inprogress AND #in_progress_expiration < :now_ms),
//     ReturnValues=ALL_OLD (the replaced item tells a takeover) and
//     ReturnValuesOnConditionCheckFailure=ALL_OLD (the live item that refused
//     the claim comes back with the failure, so a duplicate costs one call).
//     A consistent GetItem follows only if a server refuses without returning
//     the item; if the item has vanished by then, the claim is tried once more.
//   - Complete: one UpdateItem
//     SET #status = :completed, #data = :data, #expiration = :exp
//     REMOVE #in_progress_expiration, conditioned on #lease = :lease alone, so
//     a retried completion succeeds again. An item larger than
//     Options.MaxItemBytes is refused before the call.
//   - Release: one DeleteItem conditioned on
//     attribute_not_exists(#id) OR #lease = :lease, so an item that is already
//     gone counts as released.
//
// A conditional failure of Complete or Release means another invocation took
// the lease over; it is reported as [storage.ErrLeaseLost] and nothing is
// written. A claim retried by the SDK after a lost response fails its
// condition on its own item; the lease token in the returned item shows that
// the claim was in fact made.
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
//
// With Options.SortKeyAttr set (a table shared with other data, or a table
// whose key schema is fixed), the partition key holds the constant
// Options.StaticPartitionKey and the sort key holds the record ID.
//
// Records are read strictly: a missing attribute, a wrong type or an
// unparsable number is reported as [idempotent.ErrCorruptRecord] naming the
// attribute. An item without a version attribute decodes with Version 0,
// which the wrapper refuses as foreign. Either way such an item is never
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
// The function's role needs dynamodb:PutItem, dynamodb:UpdateItem,
// dynamodb:DeleteItem and dynamodb:GetItem (the last for the fallback read
// only) on the table.
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
