// Command idemkit finds, inspects and safely clears idempotency records, and
// checks a table before it bites. Records are stored under
// "<prefix>#<sha256>", so a raw key from a support ticket cannot be found
// with the AWS console; idemkit derives the id exactly as the wrapper and the
// adapters do.
//
// Install:
//
//	go install github.com/idemkit/idemkit/cmd/idemkit@<version>
//
// or, until a release is on the module proxy, from a clone:
//
//	go -C /path/to/idemkit install ./cmd/idemkit
//
// Commands (each has --help):
//
//	idemkit id       --prefix P --key K [--scope S]            print a record id
//	idemkit id       --prefix P --http-key H --caller KIND [--caller-part X]...   (API Gateway adapter)
//	idemkit inspect  (--id ID | key flags) STORE [--show-response] [--json]
//	idemkit forget   (--id ID | key flags) STORE [--force] [--dry-run]
//	idemkit list     --stuck | --in-progress STORE [--prefix P] [--limit N] [--json]
//	idemkit check    STORE
//
// The prefix P is the function's name (AWS_LAMBDA_FUNCTION_NAME) unless the
// function sets idempotent.WithPrefix; off Lambda it is "idemkit". --key is
// the raw key of idempotent.Wrap, sqsbatch and nethttp (for nethttp, the
// header's key without its quotes), with --scope for their scope. --http-key
// is the Idempotency-Key header as the client sent it to the API Gateway
// adapter, quotes included if any (Idempotency-Key: "a b" is
// --http-key '"a b"' in the shell), with the caller it was scoped to: --key
// never finds an API Gateway record.
//
// STORE is one of:
//
//   - --table NAME: DynamoDB (region, credentials and endpoint from the
//     usual AWS environment, AWS_ENDPOINT_URL_DYNAMODB included). One flag
//     per dynamostore.Options attribute name (--key-attr, --sort-key-attr,
//     --static-partition-key, --steps-attr, --suspended-attr, ...) gives the
//     table's layout. With an endpoint override the client skips the SDK's
//     response checksum check, which DynamoDB Local's error responses fail;
//     against AWS it stays on.
//   - --redis URL: one Redis server (redis://[user:password@]host:port[/db],
//     rediss:// for TLS). When the server is a node of a Redis Cluster, the
//     command uses the whole cluster, as with --redis-cluster.
//   - --redis-cluster ADDRS: a Redis Cluster, by some of its nodes:
//     host:port,host:port,... or go-redis's cluster URL
//     redis://[user:password@]host:port?addr=host2:port2&addr=host3:port3
//     (redis.ParseClusterURL). inspect and forget go to the primary that
//     holds the record's slot; list scans every primary; check reads the
//     cluster's state and every primary's eviction policy.
//
// --redis-key-prefix is redisstore's Options.KeyPrefix.
//
// Exit statuses: 0 done, 1 failed (table missing, no credentials, store
// unreachable), 2 usage, 3 no such record, 4 corrupt or foreign record
// (shown as stored, never changed or deleted), 5 forget refused (without
// --force: a live INPROGRESS record, or one holding finished steps; or the
// record changed since it was read), 6 check found problems. Errors are one line on stderr. See docs/operations.md,
// "A customer's retry gets 409 for an hour".
package main
