// Command demo tells idemkit's story in a few seconds: it creates the sample
// tables in a local DynamoDB, drives the real sample handlers
// (functions/payments, functions/orders and functions/receipts, wired as
// their main packages wire them) with the sample events in events/ through
// lambda.NewHandler(handler).Invoke, the code path of lambda.Start, then
// serves the payments logic (payments.NewHTTPHandler) through
// nethttp.Middleware on a net/http server on a free loopback port, driven by
// a real http.Client, prints what each step did, shows the tables that prove it, and deletes the
// tables again.
//
// Run it with a DynamoDB Local started for it:
//
//	make demo        # scripts/with-dynamodb.sh go run ./cmd/demo
//
// It needs AWS_ENDPOINT_URL_DYNAMODB and refuses to run without it, so it
// never creates tables in an AWS account. It exits with status 1 if any step
// does not turn out as the story says, so it doubles as a smoke test.
//
// Flags:
//
//	-v      write the functions' JSON logs to stderr (default: discarded)
//	-keep   keep the tables (and print their names) instead of deleting them
package main
