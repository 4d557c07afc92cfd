package nethttp

import (
	"net/http"
	"strconv"
)

// HeaderIdempotencyKey is the request header that carries the idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderReplayed marks a replayed response: "Idempotent-Replayed: true".
const HeaderReplayed = "Idempotent-Replayed"

// MaxKeyLength is the longest idempotency key accepted, in bytes, after an
// RFC 8941 quoted string is unquoted.
const MaxKeyLength = 255

// ContentTypeProblem is the media type of the middleware's error answers
// (RFC 9457 problem details).
const ContentTypeProblem = "application/problem+json"

// Problem types: the "type" member of the middleware's problem details. They
// are stable, and the same as the apigateway adapter's; match on them rather
// than on titles or details.
const (
	// ProblemMissingKey: 400, the method requires an Idempotency-Key header and
	// the request has none.
	ProblemMissingKey = "https://idemkit.dev/problems/missing-key"
	// ProblemInvalidKey: 400, the Idempotency-Key header is malformed (empty,
	// longer than MaxKeyLength, not ASCII, badly quoted, or repeated).
	ProblemInvalidKey = "https://idemkit.dev/problems/invalid-key"
	// ProblemInvalidJSON: 400, the Content-Type says JSON but the body is not
	// valid JSON or holds an object with a duplicate key.
	ProblemInvalidJSON = "https://idemkit.dev/problems/invalid-json"
	// ProblemMalformedRequest: 400, the request body could not be read. The
	// handler did not run.
	ProblemMalformedRequest = "https://idemkit.dev/problems/malformed-request"
	// ProblemRequestTooLarge: 413, the request body is larger than
	// WithMaxBody. The handler did not run.
	ProblemRequestTooLarge = "https://idemkit.dev/problems/request-too-large"
	// ProblemInProgress: 409 with Retry-After, a request with the same key is
	// still being processed. Retry later to get its response.
	ProblemInProgress = "https://idemkit.dev/problems/in-progress"
	// ProblemPayloadMismatch: 422, the key was already used for a request with
	// another method, path, query or body. Not retryable with this key.
	ProblemPayloadMismatch = "https://idemkit.dev/problems/payload-mismatch"
	// ProblemResponseNotStored: 409 without Retry-After, the request was
	// already processed but its response was not kept (larger than the store
	// or WithMaxBody allows, or flushed while it ran), so it cannot be
	// replayed. Not retryable with this key.
	ProblemResponseNotStored = "https://idemkit.dev/problems/response-not-stored"
	// ProblemStoreUnavailable: 503 with Retry-After, the idempotency store
	// could not be reached; the handler did not run. Retryable.
	ProblemStoreUnavailable = "https://idemkit.dev/problems/store-unavailable"
	// ProblemTxAborted: 409 without Retry-After, the handler's own writes
	// (its transaction, see docs/transactions.md) could not commit: a
	// condition on the current state failed, so nothing changed and the
	// record was released. The same key may be retried once the state
	// allows it.
	ProblemTxAborted = "https://idemkit.dev/problems/transaction-aborted"
	// ProblemTxRefused: 500 without Retry-After, the database refused the
	// handler's own writes as a whole (a table that does not exist, access
	// denied, a server without transactions): a configuration error, not an
	// outage. Nothing changed and the record was released.
	ProblemTxRefused = "https://idemkit.dev/problems/transaction-refused"
	// ProblemCorruptRecord: 500, the stored record for this key is corrupt or
	// of a format this version cannot read; it is never replayed.
	ProblemCorruptRecord = "https://idemkit.dev/problems/corrupt-record"
	// ProblemInternal: 500, the handler panicked, or the caller could not be
	// named (WithScope). The record was released, so a retry with the same
	// key runs the handler again.
	ProblemInternal = "https://idemkit.dev/problems/internal-error"
)

// writeProblem answers with p.
func writeProblem(w http.ResponseWriter, p problem) {
	h := w.Header()
	for k, v := range p.Headers() {
		h.Set(k, v)
	}
	body := p.Body()
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body) // the client may be gone; nothing to do about it
}
