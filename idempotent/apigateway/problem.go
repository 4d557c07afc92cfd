package apigateway

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// ContentTypeProblem is the media type of the adapter's error answers
// (RFC 9457 problem details).
const ContentTypeProblem = "application/problem+json"

// Problem types: the "type" member of the adapter's problem details. They are
// stable; match on them rather than on titles or details.
const (
	// ProblemMissingKey: 400, the method requires an Idempotency-Key header and
	// the request has none.
	ProblemMissingKey = "https://idemkit.dev/problems/missing-key"
	// ProblemInvalidKey: 400, the Idempotency-Key header is malformed (empty,
	// longer than MaxKeyLength, not ASCII, badly quoted, or repeated).
	ProblemInvalidKey = "https://idemkit.dev/problems/invalid-key"
	// ProblemInvalidJSON: 400, the Content-Type says JSON but the body is not
	// valid JSON or holds an object with a duplicate key (which would make
	// the body's meaning depend on the parser).
	ProblemInvalidJSON = "https://idemkit.dev/problems/invalid-json"
	// ProblemMalformedRequest: 400, the event is not an API Gateway proxy
	// request of the expected payload format version: it carries no HTTP
	// method, so whether it needs an Idempotency-Key cannot be told. The
	// handler did not run.
	ProblemMalformedRequest = "https://idemkit.dev/problems/malformed-request"
	// ProblemInProgress: 409 with Retry-After, a request with the same key is
	// still being processed. Retry later to get its response.
	ProblemInProgress = "https://idemkit.dev/problems/in-progress"
	// ProblemPayloadMismatch: 422, the key was already used for a request with
	// another method, path, query or body. Not retryable with this key.
	ProblemPayloadMismatch = "https://idemkit.dev/problems/payload-mismatch"
	// ProblemResponseNotStored: 409 without Retry-After, the request was
	// already processed but its response was too large (or not serializable)
	// to keep, so it cannot be replayed. Not retryable with this key.
	ProblemResponseNotStored = "https://idemkit.dev/problems/response-not-stored"
	// ProblemStoreUnavailable: 503 with Retry-After, the idempotency store
	// could not be reached; the handler did not run. Retryable.
	ProblemStoreUnavailable = "https://idemkit.dev/problems/store-unavailable"
	// ProblemCorruptRecord: 500, the stored record for this key is corrupt or
	// of a format this version cannot read; it is never replayed.
	ProblemCorruptRecord = "https://idemkit.dev/problems/corrupt-record"
	// ProblemInternal: 500, the handler failed or panicked. The record was
	// released, so a retry with the same key runs the handler again.
	ProblemInternal = "https://idemkit.dev/problems/internal-error"
)

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// problemResponse renders a problem; retryAfter > 0 adds a Retry-After header
// in whole seconds, rounded up.
func problemResponse(status int, typ, title, detail string, retryAfter time.Duration) response {
	body, _ := json.Marshal(problem{Type: typ, Title: title, Status: status, Detail: detail}) // strings and an int always marshal
	headers := map[string]string{
		"Content-Type":  ContentTypeProblem,
		"Cache-Control": "no-store",
	}
	if retryAfter > 0 {
		headers["Retry-After"] = strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10)
	}
	return response{StatusCode: status, Headers: headers, Body: string(body)}
}
