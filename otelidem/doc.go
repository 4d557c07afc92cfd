// Package otelidem traces and measures idemkit's idempotent calls with
// OpenTelemetry: a span per call of an [idempotent.Engine] (every front door
// goes through [idempotent.Engine.Do]), with the facts a reader needs, events
// for what happened inside, a link from a replay to the run that stored its
// response, and two metrics beside the EMF ones. It is a module of its own,
// so that users of idemkit who do not trace download none of OpenTelemetry:
// the core, the stores and the front doors link none of it. It uses only the
// OpenTelemetry API; the SDK (or any other implementation) is the
// program's.
//
//	engine := idempotent.New(store, otelidem.Instrument(
//		otelidem.WithTracerProvider(tp), otelidem.WithMeterProvider(mp)))
//
// # The span
//
// One span per call, named [SpanName], from before the claim to after the
// completion (for a batch record, until its completion lands). It is the
// child of the span in the call's context (otelhttp's, or one the Lambda
// handler started for the invocation), so the work's own spans and the
// store client's are its children. With no span there, it continues the
// producer's trace that the front door's record carries — an SQS message's
// traceparent attribute or AWSTraceHeader system attribute (X-Ray format),
// a Kafka record's headers, an API Gateway request's headers; over plain
// net/http, [Extract] reads the caller's traceparent — as a consumer span;
// with a span there, it links to the producer instead.
//
// Its attributes: [AttrOutcome], [AttrRecordID] (the hashed id, never the
// raw key), [AttrPrefix], [AttrStore], [AttrStoreCalls], [AttrHandlerRan],
// and when they hold [AttrTookOver], [AttrResumed] with [AttrResumedSteps],
// [AttrFromCache], [AttrShared]; each of the call's idempotent.Call.Attrs as
// "idemkit.<key>" (the batch adapters' message_id). Its events, one per
// idempotent.Stage: claim (claimed, took_over, resumed), wait (seconds),
// step (name, replayed), run, commit, give_back, each with the error
// message when the stage failed. The store-call count is the number of
// claims (polls included), recorded steps, completions and give-backs the
// engine reported: a cache hit or a shared replay counts 0; a claim a batch
// made for many records at once counts 1 for each; the best-effort release
// after a failed claim and the settling write after a commit of unknown
// outcome are not counted. A failing outcome (handler error, store error,
// lease lost, not stored) sets the span's status to Error with the error's
// message; the rules' refusals (in progress, payload mismatch, rejected)
// do not.
//
// # The link to the original
//
// The completing call's traceparent is kept in its record
// (storage.Record.Trace, an optional part of the record every store of
// idemkit persists), so a replay's span — in another process, after a
// restart, days later — links to the span of the run that produced the
// answer (attribute idemkit.link = "completed_by"). Records written
// untraced, by older versions or by other libraries have none, and their
// replays no link.
//
// # Metrics
//
// [MetricCalls], a counter of calls by idemkit.outcome, and
// [MetricAddedLatency], a histogram of the seconds a call spends outside its
// work (its duration less the work's run), by idemkit.outcome.
//
// # What is never recorded
//
// The raw idempotency key, the scope, the payload, the response, and the
// lease token. Error messages are (as OpenTelemetry's own instrumentations
// record them): a handler's error that holds sensitive text puts it in the
// trace.
//
// Everything here is safe for concurrent use. docs/tracing.md shows the
// wiring on Lambda and on a net/http server.
package otelidem
