// Package emf counts idempotency outcomes as CloudWatch metrics, by writing
// Embedded Metric Format (EMF) log lines that CloudWatch Logs turns into
// metrics with no API call and no agent.
//
//	metrics := emf.New(os.Stdout, func(o *emf.Options) { o.Namespace = "payments" })
//	engine := idempotent.New(store, idempotent.WithOutcomeHook(metrics.Hook))
//	handler := idempotent.Wrap(engine, charge)
//
// Each invocation writes one line holding a count of 1 for its outcome
// (executed, replayed, in_progress, payload_mismatch, handler_error,
// not_stored, response_not_stored, lease_lost, store_error, rejected,
// bypassed), a took_over count when a crashed owner was taken over, a
// resumed count when a record suspended after a handler error was resumed
// (not a takeover), a from_cache count for local-cache replays, and the wrapper's duration in
// milliseconds. Writing a line per invocation, rather than buffering, means a
// frozen or killed Lambda environment loses no metric.
//
// The ones to alarm on are lease_lost (an owner overran its lease), store_error
// (the table is throttled or unreachable), not_stored (responses too large to
// replay) and took_over (invocations crashed or timed out mid-way).
//
// A Metrics is safe for concurrent use.
package emf
