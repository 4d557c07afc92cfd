// Package modelcheck holds a stateful, model-based test of the idempotency
// protocol: random sequences of invocations, handler completions and
// failures, owner crashes, store faults and forward jumps of an injected
// clock are run through the real idempotent.Wrap over each Store (the memory
// store, DynamoDB Local and Redis), and after every step the outcome is
// compared with a small reference model of the record of each key (status,
// bound payload, owner, lease end, expiry, stored response).
//
// The model computes lease ends and expiries from the documented options with
// saturating arithmetic, independently of the implementation, and checks:
//
//  1. a handler never starts for a key while another owner of that key runs
//     with a live lease, and a record is taken over only after its lease;
//  2. a payload other than the one a live record was claimed with never runs
//     and is never given a replay (it gets idempotent.ErrPayloadMismatch);
//  3. every replay is the response of the run whose completion landed;
//  4. a fenced completion or release never changes a record owned by
//     another lease;
//  5. no record refuses a claim it should allow (an INPROGRESS record past
//     its lease, an expired record), and whatever the store answers, a caller
//     gets its handler's response or a documented sentinel error, never a
//     wrong value.
//
// The test is TestModel: 100 random runs of about 30 steps per store by
// default (make test), more with rapid's flags, for example
// -rapid.checks=5000 -rapid.steps=50 (make fuzz). A failure prints the
// violated invariant and the shrunk sequence of steps, and rapid writes a
// fail file under testdata/rapid that later runs replay first; -rapid.seed
// reproduces it too. The package has no non-test code.
package modelcheck
