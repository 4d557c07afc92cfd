package storage

import "errors"

// Errors a Store returns. Match them with errors.Is; a store wraps them with
// its cause.
var (
	// ErrCorruptRecord: a stored record cannot be decoded or is of an unknown
	// format version; it is never replayed. Front doors return it to callers
	// (as idempotent.ErrCorruptRecord, the same value). Not retryable until
	// the record expires.
	ErrCorruptRecord = errors.New("idempotent: corrupt or foreign record")

	// ErrLeaseLost: a fenced completion or release found the record owned by
	// another lease (a takeover happened). The engine reports it to the
	// outcome hook and the log, not to the caller.
	ErrLeaseLost = errors.New("idempotent: lease lost to another invocation")

	// ErrTooLarge: Complete cannot hold a record that large. The engine then
	// completes the record without its response.
	ErrTooLarge = errors.New("idempotent: record too large for the store")

	// ErrAlreadyCompleted: a fenced release or suspend found the record
	// COMPLETED under the caller's own lease, so the caller's completion (or
	// its transaction's commit) landed, though its answer may have been lost.
	// The record is left as it is. The engine relies on it to settle a commit
	// whose outcome was unknown (docs/transactions.md).
	ErrAlreadyCompleted = errors.New("idempotent: the record is already completed under this lease")
)

// DefaultMaxItemBytes is the item size limit a store enforces unless told
// otherwise: DynamoDB's 400 KB, so the memory and Redis stores meet the same
// limit as production.
const DefaultMaxItemBytes = 400 << 10

// MaxIDBytes is the longest record ID the engine writes: a prefix of at most
// 512 bytes, '#', and 64 hex digits. Every store must hold IDs this long
// (DynamoDB's sort key allows 1,024 bytes).
const MaxIDBytes = 512 + 1 + 64

// MaxStepNameBytes is the longest step name the engine writes
// (idempotent.Step refuses longer ones). Every StepStore must hold names
// this long.
const MaxStepNameBytes = 128
