// Package events holds the sample events of the sample functions: API Gateway
// HTTP API (payload format 2.0) requests for functions/payments and SQS
// batches for functions/orders, as JSON files in the real shapes Lambda
// delivers (request context, JWT authorizer claims, SQS attributes and MD5s).
// README.md in this folder lists them and what each should produce.
//
// The files are embedded, so the demo and the tests read the same bytes from
// any working directory; other tools (a LocalStack invoke, sam local invoke
// -e) can use the files directly. Import it under another name next to
// github.com/aws/aws-lambda-go/events, for example samples.
//
// The package's functions are safe for concurrent use.
package events
