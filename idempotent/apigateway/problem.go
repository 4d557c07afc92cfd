package apigateway

import "github.com/idemkit/idemkit/idempotent/internal/httprules"

// HeaderIdempotencyKey is the request header that carries the idempotency key.
const HeaderIdempotencyKey = httprules.HeaderIdempotencyKey

// HeaderReplayed marks a replayed response: "Idempotent-Replayed: true".
const HeaderReplayed = httprules.HeaderReplayed

// MaxKeyLength is the longest idempotency key accepted, in bytes, after an
// RFC 8941 quoted string is unquoted.
const MaxKeyLength = httprules.MaxKeyLength

// ContentTypeProblem is the media type of the adapter's error answers
// (RFC 9457 problem details).
const ContentTypeProblem = httprules.ContentTypeProblem

// Problem types: the "type" member of the adapter's problem details. They are
// stable, and the same in every HTTP front door (package nethttp exports them
// too); match on them rather than on titles or details.
const (
	// ProblemMissingKey: 400, the method requires an Idempotency-Key header and
	// the request has none.
	ProblemMissingKey = httprules.ProblemMissingKey
	// ProblemInvalidKey: 400, the Idempotency-Key header is malformed (empty,
	// longer than MaxKeyLength, not ASCII, badly quoted, or repeated).
	ProblemInvalidKey = httprules.ProblemInvalidKey
	// ProblemInvalidJSON: 400, the Content-Type says JSON but the body is not
	// valid JSON or holds an object with a duplicate key (which would make
	// the body's meaning depend on the parser).
	ProblemInvalidJSON = httprules.ProblemInvalidJSON
	// ProblemMalformedRequest: 400, the event is not an API Gateway proxy
	// request of the expected payload format version: it carries no HTTP
	// method, so whether it needs an Idempotency-Key cannot be told. The
	// handler did not run.
	ProblemMalformedRequest = httprules.ProblemMalformedRequest
	// ProblemInProgress: 409 with Retry-After, a request with the same key is
	// still being processed. Retry later to get its response.
	ProblemInProgress = httprules.ProblemInProgress
	// ProblemPayloadMismatch: 422, the key was already used for a request with
	// another method, path, query or body. Not retryable with this key.
	ProblemPayloadMismatch = httprules.ProblemPayloadMismatch
	// ProblemResponseNotStored: 409 without Retry-After, the request was
	// already processed but its response was too large (or not serializable)
	// to keep, so it cannot be replayed. Not retryable with this key.
	ProblemResponseNotStored = httprules.ProblemResponseNotStored
	// ProblemStoreUnavailable: 503 with Retry-After, the idempotency store
	// could not be reached; the handler did not run. Retryable.
	ProblemStoreUnavailable = httprules.ProblemStoreUnavailable
	// ProblemTxAborted: 409 without Retry-After, the handler's own writes
	// (its transaction, see docs/transactions.md) could not commit: a
	// condition on the current state failed, so nothing changed and the
	// record was released. The same key may be retried once the state
	// allows it.
	ProblemTxAborted = httprules.ProblemTxAborted
	// ProblemCorruptRecord: 500, the stored record for this key is corrupt or
	// of a format this version cannot read; it is never replayed.
	ProblemCorruptRecord = httprules.ProblemCorruptRecord
	// ProblemInternal: 500, the handler failed or panicked. The record was
	// released, so a retry with the same key runs the handler again.
	ProblemInternal = httprules.ProblemInternal
)
