// Package batch is the batch engine under the event-source front doors of
// idemkit: sqsbatch, kinesisbatch, ddbstreams and kafkabatch. A source turns
// its event into a slice of records and says how they must be ordered; the
// engine decodes each record, derives its key and payload, runs it through
// an idempotent.Engine (one Do call per record), keeps same-key records of
// one batch from running at the same time, runs lanes side by side where
// order allows, and returns an outcome per record. The source then builds its
// partial batch response from the outcomes: every record not done (SQS), or
// the first record not done per shard or partition (streams and Kafka, whose
// consumers checkpoint).
//
// The engine is the only code of the front doors that calls the core's
// Engine directly (Do, Reject, Disabled, Logger), so that a change to that
// API is one edit here.
//
// A Processor is safe for concurrent use.
package batch
