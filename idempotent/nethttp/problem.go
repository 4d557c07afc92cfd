package nethttp

import (
	"net/http"
	"strconv"

	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

// HeaderIdempotencyKey is the request header that carries the idempotency key.
const HeaderIdempotencyKey = httprules.HeaderIdempotencyKey

// HeaderReplayed marks a replayed response: "Idempotent-Replayed: true".
const HeaderReplayed = httprules.HeaderReplayed

// MaxKeyLength is the longest idempotency key accepted, in bytes, after an
// RFC 8941 quoted string is unquoted.
const MaxKeyLength = httprules.MaxKeyLength

// ContentTypeProblem is the media type of the middleware's error answers
// (RFC 9457 problem details).
const ContentTypeProblem = httprules.ContentTypeProblem

// Problem types: the "type" member of the middleware's problem details. They
// are stable, and the same as the apigateway adapter's; match on them rather
// than on titles or details.
const (
	// ProblemMissingKey: 400, the method requires an Idempotency-Key header and
	// the request has none.
	ProblemMissingKey = httprules.ProblemMissingKey
	// ProblemInvalidKey: 400, the Idempotency-Key header is malformed (empty,
	// longer than MaxKeyLength, not ASCII, badly quoted, or repeated).
	ProblemInvalidKey = httprules.ProblemInvalidKey
	// ProblemInvalidJSON: 400, the Content-Type says JSON but the body is not
	// valid JSON or holds an object with a duplicate key.
	ProblemInvalidJSON = httprules.ProblemInvalidJSON
	// ProblemMalformedRequest: 400, the request body could not be read. The
	// handler did not run.
	ProblemMalformedRequest = httprules.ProblemMalformedRequest
	// ProblemRequestTooLarge: 413, the request body is larger than
	// WithMaxBody. The handler did not run.
	ProblemRequestTooLarge = httprules.ProblemRequestTooLarge
	// ProblemInProgress: 409 with Retry-After, a request with the same key is
	// still being processed. Retry later to get its response.
	ProblemInProgress = httprules.ProblemInProgress
	// ProblemPayloadMismatch: 422, the key was already used for a request with
	// another method, path, query or body. Not retryable with this key.
	ProblemPayloadMismatch = httprules.ProblemPayloadMismatch
	// ProblemResponseNotStored: 409 without Retry-After, the request was
	// already processed but its response was not kept (larger than the store
	// or WithMaxBody allows, or flushed while it ran), so it cannot be
	// replayed. Not retryable with this key.
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
	// ProblemTxRefused: 500 without Retry-After, the database refused the
	// handler's own writes as a whole (a table that does not exist, access
	// denied, a server without transactions): a configuration error, not an
	// outage. Nothing changed and the record was released.
	ProblemTxRefused = httprules.ProblemTxRefused
	// ProblemCorruptRecord: 500, the stored record for this key is corrupt or
	// of a format this version cannot read; it is never replayed.
	ProblemCorruptRecord = httprules.ProblemCorruptRecord
	// ProblemInternal: 500, the handler panicked, or the caller could not be
	// named (WithScope). The record was released, so a retry with the same
	// key runs the handler again.
	ProblemInternal = httprules.ProblemInternal
)

// writeProblem answers with p.
func writeProblem(w http.ResponseWriter, p httprules.Problem) {
	h := w.Header()
	for k, v := range p.Headers() {
		h.Set(k, v)
	}
	body := p.Body()
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body) // the client may be gone; nothing to do about it
}
