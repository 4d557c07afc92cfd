// Command idembench is idemkit's benchmark harness: `make bench` builds it
// and runs it under scripts/with-dynamodb.sh, scripts/with-redis.sh and
// scripts/with-postgres.sh, and it writes BENCHMARKS.md.
// It is not part of the library: nothing imports it, and it needs nothing
// the root module does not already require.
//
// It measures, against the DynamoDB Local, the redis-server and the
// PostgreSQL server the scripts start:
//
//  1. DynamoDB calls per invocation, counted by an SDK middleware, for a new
//     key, a replay, a replay from the local cache, an in-progress
//     duplicate, a handler error and a lease takeover (driven by
//     idempotent.WithClock, never by sleeping). A missed target makes the
//     command fail.
//  2. The distance from the floor: a wrapped invocation against the bare
//     SDK calls it cannot avoid (the same calls, items of the same
//     attributes and id length). Median latency, interleaved one invocation
//     at a time, in several runs (the gate is the median of their ratios);
//     client instructions per invocation, counted by valgrind's callgrind
//     (instr.go): each path's driver process under callgrind, its counters
//     zeroed and dumped at marks around each measured phase, so start-up
//     and warm-up are not in them, in a few rounds (the gate: Wrap ≤ 1.03;
//     missed or not measured, the command fails), with the wrapped rounds
//     against each other to show how finely they resolve (about a
//     hundredth); client CPU seconds beside them, without a ceiling, each
//     path in a driver process of its own (getrusage), the two run side by
//     side phase by phase (cpupair.go), in several rounds, and the wrapped
//     driver against itself the same way. §9 and §10 measure their front
//     doors the same way (ceilings 1.05). Needs valgrind (scripts/ci-deps.sh
//     bench installs it); without it the command fails at once.
//  3. idemkit against Powertools for AWS Lambda (TypeScript), whose script
//     and exact pins are in powertools/: client CPU per invocation (the
//     target), throughput, latency and calls, with the same events, table
//     layout and concurrency.
//  4. The core's in-process benchmarks (go test -bench, summarized with a
//     pinned benchstat), reported without a target: absolute times differ
//     from machine to machine.
//  5. Cold start of the sample functions against hello/ and hellodynamodb/
//     (the target's floor), under a minimal Lambda Runtime API of its own
//     (runtimeapi.go), and their arm64 sizes.
//  6. Throughput and cost per invocation at 1 to 64 concurrent invocations.
//  7. The Redis store's distance from its floor (2's method over Redis): the
//     wrapper over redisstore, the store's calls alone, two hand-written Lua
//     scripts and the handler alone, interleaved; commands per invocation
//     (a go-redis hook; a missed target makes the command fail) and the
//     latency the check adds.
//  8. What idempotency costs in DynamoDB capacity: both drivers of 3 once
//     more with ReturnConsumedCapacity=TOTAL set by a middleware on their
//     clients, for a small and a ~1 KB response, the failed conditional
//     writes of replays derived from the units DynamoDB Local reports, and
//     the result in dollars at on-demand prices (capacity.go).
//  9. The net/http middleware (httpmw.go): in process, its cost over the
//     bare handler for a 1 KB JSON POST, first run and replay (go test
//     -bench of idempotent/nethttp); over real HTTP (a net/http server on
//     loopback) on DynamoDB Local, 2's method (wrapped / bare median latency
//     beyond the store calls' own time) and the calls per request: new key,
//     replay, in progress on another instance and on the same one; its
//     client CPU against the floor's (2's method, ServeHTTP called in the
//     driver's process), and its client instructions (2's method; ceiling
//     1.05). A missed calls target or instruction ceiling makes the command
//     fail. Alone: -only 9.
//  10. The API Gateway front door (apigw.go): apigateway.WrapV2 called as the
//     Lambda runtime calls a handler, with the sample HTTP API event
//     (events/payments-new.json) carrying the 1 KB payment: 2's method for
//     median latency, client instructions (ceiling 1.05) and client CPU,
//     and the calls per request of WrapV2 and WrapV1. A missed calls target
//     or instruction ceiling makes the command fail.
//  11. The PostgreSQL store's distance from its floor (pgfloor.go): round
//     trips per invocation, counted on the connection (internal/pgtrips,
//     as pgstore's tests count them) for a new key (2), a replay (1), a
//     duplicate in progress on another instance (1) and a new key whose
//     handler inserts one row in pgstore.Tx (5: claim, BEGIN, INSERT,
//     completion, COMMIT); a missed target, or the section not measured,
//     makes the command fail. Then that handler's INSERT alone (bare), the
//     same through idempotent.Wrap in pgstore.Tx (wrapped) and the wrapper
//     around a handler without SQL, interleaved one invocation at a time as
//     in 7, for a new key and a replay: median and p99, and the latency the
//     check adds at p99 (wrapped − bare; target under 5 ms). Alone: -only 11.
//  12. Batches at 5 ms a call (batchwave.go, issue 36): the batch front doors
//     with default options, one batch at a time, over each store behind a
//     TCP proxy that holds every chunk the server sends for 5 ms
//     (delayproxy.go; the same proxy in front of DynamoDB Local, redis-server
//     and PostgreSQL): kinesisbatch.Wrap with 100 records of one shard and
//     one partition key, ddbstreams.Wrap with 100 records of one shard,
//     kafkabatch.Wrap with 100 records of one partition and sqsbatch.Wrap
//     with 10 messages of a standard queue (built from events/ by
//     batchevents.go), new keys then the replay, and 100 Kinesis records
//     whose 50th fails, then their redelivery from it. Per batch: the median
//     wall time of -batch-runs runs (DynamoDB; -batch-runs-others over Redis
//     and PostgreSQL), records/s and the store calls per record (counted as
//     in 1, 7 and 11). Beside them, Powertools' batch
//     processor with its idempotency on the same SQS and Kinesis batches
//     through the same proxy (powertools/batch.mjs). The calls per record
//     (at most 2 new, 1 replay, with each batch's handler runs and partial
//     batch response checked) and the time targets (an ordered batch of
//     100 within 100 ms, ≥ 1,000 records/s, no slower than Powertools:
//     batchTimesGated) make the command fail when missed. Alone: -only 12.
//
// Usage:
//
//	scripts/with-dynamodb.sh scripts/with-redis.sh scripts/with-postgres.sh build/bench/idembench [-out BENCHMARKS.md] [-only 1,3] [flags]
//	build/bench/idembench drive -table T [-n N] [-c C] [-phases new,replay|mixed] [-door wrap|http|apigw] [-bare] [-sync] [-callgrind] [-capacity] [-pad N]   (a child process of 2, 3, 6, 8, 9 and 10)
//
// Each section runs on tables (DynamoDB and PostgreSQL) and Redis keys of its
// own, created and deleted by the run. Sections 2, 3, 6, 8, 9 and 10 run their drivers as
// child processes, so each process's CPU time is its own.
package main
