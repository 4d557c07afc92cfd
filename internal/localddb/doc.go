// Package localddb connects tests, the demo and the benchmarks to a local
// DynamoDB: DynamoDB Local, as scripts/with-dynamodb.sh starts it, or
// LocalStack. It builds a client from the environment, skips tests that find
// no endpoint, and creates and deletes the sample stack's three tables under
// names unique to each caller, so tests can run in parallel on one server.
//
// Nothing here talks to real AWS: Client refuses to build a client unless
// AWS_ENDPOINT_URL_DYNAMODB names a local endpoint, so a demo or test run
// without one can never create tables in an AWS account.
//
// The functions are safe for concurrent use.
package localddb
