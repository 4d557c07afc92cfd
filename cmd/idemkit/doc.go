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
// Commands (each has --help):
//
//	idemkit id       --prefix P --key K [--scope S]            print a record id
//	idemkit id       --prefix P --http-key H --caller KIND [--caller-part X]...   (API Gateway adapter)
//	idemkit inspect  (--id ID | key flags) STORE [--show-response] [--json]
//	idemkit forget   (--id ID | key flags) STORE [--force] [--dry-run]
//	idemkit list     --stuck | --in-progress STORE [--limit N] [--json]
//	idemkit check    STORE
//
// STORE is --table NAME (DynamoDB: region, credentials and endpoint from the
// usual AWS environment, AWS_ENDPOINT_URL_DYNAMODB included; the layout flags
// mirror dynamostore.Options) or --redis URL. With an endpoint override the
// client skips the SDK's response checksum check, which DynamoDB Local's
// error responses fail; against AWS it stays on.
//
// Exit statuses: 0 done, 1 failed (table missing, no credentials, store
// unreachable), 2 usage, 3 no such record, 4 corrupt or foreign record
// (shown as stored, never changed), 5 forget refused (a live INPROGRESS
// record without --force, or the record changed since it was read), 6 check
// found problems. Errors are one line on stderr. See docs/operations.md,
// "A customer's retry gets 409 for an hour".
package main
