// Package storage is the contract between idempotency's engine and the stores
// that persist its records: the [Store] interface, the [Record] it reads and
// writes, and the one liveness rule ([Record.Replaceable]) every store applies
// atomically. Handler authors never need it: they pass a store (dynamostore,
// redisstore or idempotent.NewMemoryStore) to a front door and match the errors
// of package idempotent. Store implementers use it together with
// package storetest, the conformance suite every Store must pass.
//
// Optional capabilities extend a Store, discovered with a type assertion as
// database/sql discovers a driver's: [StepStore] (steps), [TxStore] (the
// handler's own writes), [ClaimManyStore] (a batch's claims in one call),
// [FinishManyStore] (its completions and give-backs in one call) and
// [AdminStore] (reading, deleting and listing records, for operators'
// tools).
//
// The split follows database/sql and database/sql/driver: what callers use lives
// in idempotent, what a store must implement lives here.
//
// # Text
//
// Every string the engine hands a store is valid UTF-8 without a NUL byte:
// a [Record]'s ID (the prefix, '#' and hex digits; at most [MaxIDBytes]),
// Status (one of the constants), Lease and Fingerprint (hex digits, or an
// empty Fingerprint), Trace (printable ASCII, or empty), and a [Step]'s Name (at most [MaxStepNameBytes]). The
// engine refuses other text before any store call: a prefix when
// idempotent.New runs, a step name with idempotent.ErrInvalidStep before the
// step's function runs. So a store whose text cannot hold a NUL byte or
// invalid UTF-8 (PostgreSQL's text) behaves as every other. Every store must
// hold all such text, multibyte characters included, byte for byte: no
// Unicode normalization, no case folding, no trimming, so that distinct IDs
// and step names stay distinct. storetest checks it.
package storage
