// Package deployed reaches a deployed stack for the end-to-end suite
// (package e2e): functions through the Lambda Invoke API, the orders queue
// through SQS. It is a Go module of its own so that the library's module does
// not require the Lambda and SQS clients, which only this suite uses; its
// tests run the suite against a fake Invoke API in `make test` and against
// LocalStack or AWS in `make test-local`.
package deployed
