// Package idempotent makes AWS Lambda handlers (and any function of the shape
// func(context.Context, In) (Out, error)) idempotent: running an invocation twice
// produces the same observable outcome as running it once.
//
// Wrap claims each idempotency key in a [storage.Store] with one conditional write, runs the
// handler once, stores its serialized response and replays that response to
// duplicates:
//
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	engine := idempotent.New(store, idempotent.WithExpiry(24*time.Hour))
//	lambda.Start(idempotent.Wrap(engine, chargeCard, idempotent.WithKey(func(r ChargeRequest) (string, error) {
//		return r.OrderID, nil
//	})))
//
// # One engine, many front doors
//
// The core is configured once: [New] makes an [Engine] from a store and the
// core's [Option]s (prefix, expiry, leases, waiting, cache, codec, logger,
// outcome hooks, which compose), and every front door takes that Engine and
// keeps only options of its own: Wrap's [WrapOption]s (key, scope and payload
// functions, typed by the handler's input, so a function for another type
// does not compile), and the options of the adapter packages. No
// option passes through, and none overrides another.
//
// The Engine knows nothing of types: its own call, [Engine.Do], takes a
// [Call] (key, scope, payload) and work that returns its response encoded,
// and answers with the encoded response. Every front door converges on it:
// Wrap is the typed layer over it, and the adapters (nethttp, apigateway,
// sqsbatch, kinesisbatch, ddbstreams, kafkabatch, rabbitmqbatch,
// activemqbatch) call it with what they parsed. A front door of your own
// (SNS, EventBridge, a gRPC interceptor) calls it too, or wraps a typed
// handler with Wrap; [Engine.Reject] reports a call it refuses before Do.
// [RecordID] names a key's record, for logs and tools.
//
// Coalescing: concurrent calls for one record in one process (one Engine)
// share one claim. While a call holds the record's lease, a duplicate gets
// [ErrInProgress] with no store call, or, with [WithWaitInProgress], the
// response the moment it is stored ([Event].Shared); a different payload gets
// [ErrPayloadMismatch]. A failed run shares nothing: each waiter then tries
// for itself, one at a time. A holder that overruns its lease is taken over
// through the store, as from another process. Duplicates in other processes
// meet in the store, whose conditional writes are what makes all of this
// safe.
//
// # The record and its states
//
// One record per key. A claim creates it INPROGRESS with a lease (a random token
// and an end time derived from ctx.Deadline()); a successful handler completes it
// (COMPLETED, with the response); a failed handler releases it (deletes it) so a
// retry runs again, or, when it holds finished steps ([Step]), suspends it (keeps
// it and ends its lease) so the retry resumes after them. Completion and release are fenced by the lease token: an
// invocation whose lease was taken over can neither overwrite nor delete the new
// owner's record. After its lease, an INPROGRESS record may be taken over by a
// retry; after its expiry (default one hour) any record is treated as absent,
// whether or not DynamoDB's TTL has deleted it yet.
//
// # Guarantees
//
// While a record lives, a duplicate never re-runs the handler: it gets the stored
// response, [ErrInProgress], [ErrPayloadMismatch] or [ErrResponseNotStored]. The
// exception is a takeover: an owner that crashed or overran its lease is presumed
// dead, and the retry that takes its record over runs the handler again. Idempotent
// is therefore not exactly-once; pass [DownstreamKey] to external APIs so that even a
// re-execution after a takeover does not repeat their side effect. With steps
// ([Step]), the re-run resumes after the last finished step instead: docs/steps.md
// in the repository states what that changes.
//
// When the handler succeeds but its completion cannot be written (the store is
// down), the caller still gets its response and the record is left to its lease;
// a duplicate arriving after the lease re-runs the handler. This is logged at
// error level and reported to the outcome hook.
//
// # Without idempotency: IDEMKIT_DISABLED
//
// With IDEMKIT_DISABLED=1 (or true) in the environment when New runs, every
// front door of the Engine calls its handler directly: no store call, no
// record, no key or payload derived, and every invocation reported as
// [OutcomeBypassed]; [Step] just calls its function. New logs a warning. It
// is for local runs and tests only (t.Setenv("IDEMKIT_DISABLED", "1") before
// New), never for production.
//
// # Concurrency
//
// A wrapped function is safe for concurrent use by multiple goroutines, as
// aws-lambda-go may run several invocations in one process. The package never
// panics of its own accord per invocation (a handler's panic is re-raised
// after its record is released); programmer errors found while wrapping (a nil store, a
// key function of the wrong input type) panic at start-up, as regexp.MustCompile
// does.
package idempotent
