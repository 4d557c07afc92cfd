// Package modelcheck holds a stateful, model-based test of the idempotency
// protocol: random sequences of invocations, handler completions and
// failures, owner crashes, store faults and forward jumps of an injected
// clock are run through the real idempotent.Wrap over each Store (the memory
// store, a memory TxStore, DynamoDB Local, Redis and PostgreSQL), and after every step
// the outcome is compared with a small reference model of the record of
// each key (status, bound payload, owner, lease end, expiry, stored
// response).
//
// Each run has two or three wrappers over one store and one key prefix.
// Each wrapper has an Engine of its own, that is, one process: calls of one
// wrapper for one key coalesce in memory (idempotent/coalesce.go), and calls
// of different wrappers meet only in the store. The model knows the coalescing
// rules and checks that a call is answered without a store call only when
// they allow it. While a call of the same wrapper holds the key's lease (its
// claim succeeded, its handler runs, and its lease has not lapsed by the
// injected clock, in the model's arithmetic), a duplicate gets ErrInProgress,
// or ErrPayloadMismatch for another payload, and the key's record must be
// that call's. Past that lease, the duplicate goes to the store. A duplicate
// started while a claim of its wrapper for its key is in flight (the Race
// step holds the claim at the store) makes no store call until that claim is
// answered. It then shares the response the claim replayed, if that is for
// its payload, or follows the rules above. Every other call goes to the
// store.
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
//     wrong value;
//  6. a call is answered without a store call only where the coalescing
//     rules above allow it, with the answer they give, and goes to the store
//     everywhere else ("coalescing rule violated").
//  7. steps (idempotent.Step): a wrapper drawn with steps takes one step on
//     entering its handler. Its function runs exactly when the key's record
//     holds no finished step for the call's payload, so a finished step never
//     runs again for the same record; a claim keeps the steps of a record it
//     takes over for the same payload while that record lives, and drops
//     them otherwise; a failed run whose record holds a step suspends the
//     record (its lease ends a millisecond before now) instead of deleting
//     it, and a run without steps still releases.
//  8. transactional completion (storage.TxStore: the memory fake in
//     tx_test.go and DynamoDB Local): a wrapper drawn with tx adds a write
//     of its own to its run's transaction when its handler returns (and,
//     when drawn, one that fails). Whatever happens — a crash (the commit is
//     dropped), a lease taken over meanwhile, a failing write, a handler
//     error, a store fault before or after the commit — the write committed
//     exactly when the completion landed, and the caller gets its response
//     only then: ErrInProgress after a lost lease, ErrTxAborted after a
//     failing write (the record is given back); after an unknown outcome the
//     wrapper settles it by a give-back fenced by its lease and INPROGRESS,
//     which keeps a completed record (storage.ErrAlreadyCompleted): the
//     response when the commit landed and the settle found it, else
//     ErrStore; never a success whose writes did not commit.
//
// The test is TestModel: 100 random runs of about 30 steps per store by
// default (make test), more with rapid's flags, for example
// -rapid.checks=5000 -rapid.steps=50 (make fuzz). Its log counts how often
// calls met in a wrapper's flight and in the store. A failure prints the
// violated invariant and the shrunk sequence of steps, and rapid writes a
// fail file under testdata/rapid that later runs replay first; -rapid.seed
// reproduces it too. The package has no non-test code.
package modelcheck
