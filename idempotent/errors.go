package idempotent

import (
	"errors"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// Errors returned by wrapped functions. Match them with errors.Is; a returned
// error may wrap a sentinel together with its cause (for example ErrStore and
// the SDK's throttling error).
var (
	// ErrMissingKey: the key function returned an empty key. Returned unless
	// WithOptionalKey was given. Not retryable.
	ErrMissingKey = errors.New("idempotent: missing idempotency key")

	// ErrInvalidKey: the key or scope function failed, or the key is too long
	// or not valid UTF-8. Not retryable.
	ErrInvalidKey = errors.New("idempotent: invalid idempotency key")

	// ErrInvalidPayload: the payload-validation function failed. Not retryable.
	ErrInvalidPayload = errors.New("idempotent: invalid payload")

	// ErrInProgress: another invocation holds a live lease on the same key.
	// Retryable: retry after a short delay and get the stored response.
	ErrInProgress = errors.New("idempotent: another invocation with this key is in progress")

	// ErrPayloadMismatch: a record for the same key was written for a different
	// payload. The other payload's response is never returned. Not retryable.
	ErrPayloadMismatch = errors.New("idempotent: idempotency key reused with a different payload")

	// ErrResponseNotStored: the handler already ran for this key, but its
	// response could not be stored (too large for the store, or not
	// serializable), so a duplicate cannot be given it. The side effect is not
	// repeated. Not retryable until the record expires.
	ErrResponseNotStored = errors.New("idempotent: the original response was not stored")

	// ErrResponseEncoding: the handler succeeded but its response could not be
	// serialized, or would not be replayed equal (see WithCodec). The record
	// is completed without a response, so a retry gets ErrResponseNotStored
	// instead of running the side effect again.
	ErrResponseEncoding = errors.New("idempotent: response cannot be serialized")

	// ErrStore: the store failed (throttled, unavailable, timed out, or the
	// request context ended). When returned, the handler did not run, or
	// (with a transaction, see ErrTxAborted) it ran and the commit of its
	// writes failed: the engine then settled the record under the run's
	// lease, so nothing of the run committed and a retry runs the handler at
	// once; only when that settling write failed too is the record left in
	// progress until its lease ends (a retry then replays what committed or,
	// if nothing did, runs the handler again). Retryable. See
	// docs/transactions.md ("An unknown outcome is settled").
	ErrStore = errors.New("idempotent: store failed")

	// ErrCorruptRecord: a stored record cannot be decoded or is of an unknown
	// format version; it is never replayed. Not retryable until it expires.
	// It is storage.ErrCorruptRecord, which stores return, under the name
	// callers use (as os.ErrNotExist is fs.ErrNotExist).
	ErrCorruptRecord = storage.ErrCorruptRecord

	// ErrTxAborted: the handler succeeded, but the writes it added to its
	// store's transaction (dynamostore.Transaction) could not commit — a
	// condition of theirs failed — so nothing committed, neither the writes
	// nor the completion, and the record was released as after a handler
	// error. The store's error, wrapped with it, names the write and the
	// reason. A retry runs the handler again. It is storage.ErrTxAborted.
	// See docs/transactions.md.
	ErrTxAborted = storage.ErrTxAborted

	// ErrTxRefused: the handler succeeded, but the database refused its
	// transaction's request as a whole (invalid, a table that does not
	// exist, access denied, an operation the server lacks): a configuration
	// error, not an outage. Nothing committed and the record was released at
	// once. Not retryable until the configuration is fixed; over HTTP a 500
	// transaction-refused. It is storage.ErrTxRefused; the store's error
	// (*dynamostore.TxRefusedError) names the refusal.
	ErrTxRefused = storage.ErrTxRefused

	// ErrNoTx: a handler asked for a transaction where there is none: with a
	// store that does not commit handlers' writes, inside a Step's function,
	// or after the handler returned. Nothing was added. A programmer error.
	// It is storage.ErrNoTx.
	ErrNoTx = storage.ErrNoTx
)
