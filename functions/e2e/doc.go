// Package e2e is the end-to-end suite of the sample functions: every sample
// event in events/ sent to functions/payments and functions/orders, with
// their answers and the tables they leave behind checked, plus concurrent
// duplicates.
//
// The suite does not care how a function is reached. A [Target] bundles an
// [Invoker] per function (raw event JSON in, raw response JSON out, the
// contract of Lambda's Invoke API) and a [State] that reads the ledger and
// the inventory. This package's tests run it in process, through
// lambda.NewHandler(handler).Invoke (the code path of lambda.Start), against
// in-memory fakes and against DynamoDB Local; a target for a deployed stack
// (LocalStack or AWS) needs only an Invoker that calls the Lambda Invoke API (package deployed)
// and a [DynamoState] with the stack's table names.
//
// With a [QueueSender] in the target, orders also go through the queue, twice
// over, and the suite waits for the inventory to show each reserved once:
// deployed.SQSSender (package deployed, its own module) for a deployed queue and its event source mapping, or a
// [LocalQueue], which delivers in process as the event source mapping does
// (batches, partial batch failures redelivered, a dead-letter list).
//
// TestEmulator runs the sample bootstraps themselves, built for this machine
// as make build builds them, under AWS's Lambda Runtime Interface Emulator
// (aws-lambda-rie, pinned in the Makefile and installed by make rie into
// build/tools; package functions/internal/rie starts it on free loopback
// ports and stops it by PID), on DynamoDB Local: the suite through the
// emulator's invoke API, each function in four emulators at once as Lambda
// runs concurrent invocations in as many execution environments; each
// function's answers, replays and JSON logs; and a payment whose handler
// hangs past AWS_LAMBDA_FUNCTION_TIMEOUT (2 s) after its charge step, which
// the emulator kills: its record's lease ends the clock-skew margin after
// the deadline the emulator gave the runtime, and the retry after it takes
// over and resumes after the recorded charge. Without the emulator the test
// skips, unless IDEMKIT_REQUIRE_RIE=1 (make test sets it).
//
// Every run rewrites the sample events' idempotency keys, customer IDs,
// order IDs and SKUs with a run-unique suffix (see [Personalize]), so runs
// never meet each other's records: the suite works on tables shared with
// earlier runs and in parallel.
package e2e
