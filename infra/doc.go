// Command infra is idemkit's sample stack: a CDK app in Go that provisions
// what the sample functions need to run idempotently on AWS.
//
// It lives in its own module (github.com/idemkit/idemkit/infra) so that users
// of the library never inherit the AWS CDK in their module graph.
//
// The stack (see [NewIdemkitStack]) creates
//
//   - the idempotency table (partition key id, TTL on expiration) and the two
//     tables of the samples: the payments ledger and the inventory;
//   - the payments function behind an HTTP API (POST /payments) and the
//     orders function behind an SQS queue with a dead-letter queue and
//     partial batch responses (ReportBatchItemFailures);
//   - one IAM role per function that allows only the item-level DynamoDB
//     actions the function performs, on its own tables, and writing to its
//     own log group: no wildcard actions, no managed policies.
//
// Run it with the pinned CDK command line (package.json), never a global one:
//
//	npm ci
//	npx cdk synth                     # from ../build/{payments,orders}/bootstrap
//	npx cdk deploy                    # needs an AWS account (cdk bootstrap once)
//
// Context keys (pass with -c KEY=VALUE):
//
//	assetsDir=DIR            folder with payments/bootstrap and orders/bootstrap (default ../build)
//	retainTables=true        keep the tables when the stack is destroyed (default false: delete them)
//	lambdaArchitecture=ARCH  arm64 (default) or x86_64, for LocalStack on hosts that cannot run arm64
//	httpApi=false            leave out the HTTP API (LocalStack's free image has no API Gateway v2)
//
// The timing arithmetic (function timeouts, idempotency lease, SQS visibility
// timeout) and the reasons for every choice are in README.md.
package main
