// Package idempotent makes AWS Lambda handlers (and any function of the shape
// func(context.Context, In) (Out, error)) idempotent: running an invocation twice
// produces the same observable outcome as running it once.
//
// Wrap claims each idempotency key in a [storage.Store] with one conditional write, runs the
// handler once, stores its serialized response and replays that response to
// duplicates:
//
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	lambda.Start(idempotent.Wrap(store, chargeCard, idempotent.WithKey(func(r ChargeRequest) (string, error) {
//		return r.OrderID, nil
//	})))
//
// # One engine, many front doors
//
// Under Wrap sits an [Engine], which knows nothing of types: it takes a key,
// a scope and a payload ([Call]) and work that returns its response encoded,
// and answers with the encoded response and whether this call ran it
// ([Result]). Wrap is the typed layer over it (key, scope and payload
// functions, the codec, the replay hook); the apigateway and sqsbatch
// adapters call it directly with what they parsed, and so can your own front
// doors. [RecordID] names a key's record, for logs and tools.
//
// Options: every [Option] configures an Engine; the generic ones (WithKey,
// WithScope, WithPayloadValidation, WithReplayHook) need a typed front door
// and make [NewEngine] panic. An adapter applies its own defaults first, then
// the options given through its WithIdempotentOptions, then its own explicit
// options, so the most specific setting wins (an adapter's WithLogger over an
// idempotent.WithLogger passed through).
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
// # Concurrency
//
// A wrapped function is safe for concurrent use by multiple goroutines, as
// aws-lambda-go may run several invocations in one process. The package never
// panics of its own accord per invocation (a handler's panic is re-raised
// after its record is released); programmer errors found while wrapping (a nil store, a
// key function of the wrong input type) panic at start-up, as regexp.MustCompile
// does.
package idempotent
