// Package sampleevents reads the sample events of the sample functions, the
// JSON files in the events/ folder at the root of the repository: API Gateway
// HTTP API (payload format 2.0) requests for functions/payments and SQS
// batches for functions/orders, in the real shapes Lambda delivers (request
// context, JWT authorizer claims, SQS attributes and MD5s). events/README.md
// lists them and what each should produce.
//
// It is a tool of this repository (the demo and the tests use it), not part
// of the library. The files are read from the checkout: a go:embed pattern
// cannot reach a parent folder, and the folder stays where users look for it
// (a LocalStack invoke and sam local invoke -e use the files directly). The
// folder is found from this package's source file, or else by walking up from
// the working directory to the module's go.mod, so `go run ./cmd/demo` and
// `go test` work from anywhere in the checkout; a binary run outside a
// checkout gets a clear error.
//
// The package's functions are safe for concurrent use.
package sampleevents
