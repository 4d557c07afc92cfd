// Command idembench is idemkit's benchmark harness: `make bench` builds it
// and runs it under scripts/with-dynamodb.sh, and it writes BENCHMARKS.md.
// It is not part of the library: nothing imports it, and it needs nothing
// the root module does not already require.
//
// It measures, against the DynamoDB Local the script starts:
//
//  1. DynamoDB calls per invocation, counted by an SDK middleware, for a new
//     key, a replay, a replay from the local cache, an in-progress
//     duplicate, a handler error and a lease takeover (driven by
//     idempotent.WithClock, never by sleeping). A missed target makes the
//     command fail.
//  2. The distance from the floor: a wrapped invocation against the bare
//     SDK calls it cannot avoid, interleaved.
//  3. idemkit against Powertools for AWS Lambda (TypeScript), whose script
//     and exact pins are in powertools/: throughput, latency, calls and CPU
//     per invocation, with the same events, table layout and concurrency.
//  4. The core's in-process benchmarks (go test -bench, summarized with a
//     pinned benchstat), profiled when a target is missed.
//  5. Cold start of the sample functions against hello/, under a minimal
//     Lambda Runtime API of its own (runtimeapi.go), and their arm64 sizes.
//  6. Throughput and cost per invocation at 1 to 64 concurrent invocations.
//
// Usage:
//
//	scripts/with-dynamodb.sh build/bench/idembench [-out BENCHMARKS.md] [-only 1,3] [flags]
//	build/bench/idembench drive -table T [-n N] [-c C] [-phases new,replay|mixed]   (a child process of 3 and 6)
//
// Each section runs on tables of its own, created and deleted by the run.
// Sections 3 and 6 run their drivers as child processes, so each process's
// CPU time is its own.
package main
