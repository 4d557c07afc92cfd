package nethttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// problem is an answer of the idempotency layer itself, rendered as an RFC
// 9457 problem details object.
type problem struct {
	Status int    // the HTTP status
	Type   string // one of the problem constants
	Title  string // short, the same for every occurrence of the type
	Detail string // this occurrence, safe to show the client
	// RetryAfter > 0 adds a Retry-After header in whole seconds, rounded up.
	RetryAfter time.Duration
}

// problemBody is the JSON of a problem; its field order is what clients see.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Body is the problem's JSON.
func (p *problem) Body() []byte {
	body, _ := json.Marshal(problemBody{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail}) // strings and an int always marshal
	return body
}

// Headers are the problem's response headers: Content-Type, Cache-Control:
// no-store and, when set, Retry-After.
func (p *problem) Headers() map[string]string {
	h := map[string]string{
		"Content-Type":  ContentTypeProblem,
		"Cache-Control": "no-store",
	}
	if p.RetryAfter > 0 {
		h["Retry-After"] = strconv.FormatInt(int64(math.Ceil(p.RetryAfter.Seconds())), 10)
	}
	return h
}

// internalProblem is the answer to a handler that failed or panicked, and to any
// fault of the idempotency layer: no internal details reach the client.
func internalProblem() problem {
	return problem{Status: http.StatusInternalServerError, Type: ProblemInternal, Title: "Internal server error",
		Detail: "The request could not be processed. It may be retried with the same Idempotency-Key."}
}

// refusal is the answer to a request a front door refuses itself, before the
// core sees it, with the core error that reports it (idempotent.Engine.Reject):
// a keyError, bodyError or requestError says why.
func refusal(why error) (problem, error) {
	sentinel := idempotent.ErrInvalidPayload
	var p problem
	switch w := why.(type) {
	case *keyError:
		sentinel = idempotent.ErrInvalidKey
		p = problem{Status: http.StatusBadRequest, Type: ProblemInvalidKey, Title: "Invalid Idempotency-Key header", Detail: upperFirst(w.Reason) + "."}
	case *bodyError:
		p = problem{Status: http.StatusBadRequest, Type: ProblemInvalidJSON, Title: "Invalid JSON request body", Detail: upperFirst(w.Reason) + "."}
	case *requestError:
		p = problem{Status: http.StatusBadRequest, Type: ProblemMalformedRequest, Title: "Malformed request", Detail: upperFirst(w.Reason) + "."}
	case *tooLargeError:
		p = problem{Status: http.StatusRequestEntityTooLarge, Type: ProblemRequestTooLarge, Title: "Request body too large",
			Detail: fmt.Sprintf("The request body is larger than %d bytes; the request was not processed.", w.Limit)}
	default:
		p = internalProblem()
	}
	return p, fmt.Errorf("%w: %w", sentinel, why)
}

// tooLargeError refuses a request body larger than a front door buffers.
type tooLargeError struct {
	Limit int64 // bytes
}

// Error names the limit.
func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the request body is larger than %d bytes", e.Limit)
}

// notStoredProblem is the answer to a duplicate of a request whose response was not
// kept (too large, streamed, or not serializable).
func notStoredProblem() problem {
	return problem{Status: http.StatusConflict, Type: ProblemResponseNotStored, Title: "Response not available",
		Detail: "A request with this Idempotency-Key was already processed, but its response was not kept and cannot be returned again. Do not retry it with this key."}
}

// failure is the answer to a request the core refused (the error of
// idempotent.Engine.Do when the work did not run); retryAfter goes with the
// 409 in-progress and 503 answers. Keys and bodies a front door refuses
// itself never get here (see refusal); an invalid key from the core (one the
// front door would not have parsed) gets a generic detail.
func failure(err error, retryAfter time.Duration) problem {
	switch {
	case errors.Is(err, idempotent.ErrMissingKey):
		return problem{Status: http.StatusBadRequest, Type: ProblemMissingKey, Title: "Idempotency-Key header missing",
			Detail: "This operation requires an Idempotency-Key header; send a unique key, such as a UUID, and reuse it only to retry the same request."}
	case errors.Is(err, idempotent.ErrInvalidKey):
		return problem{Status: http.StatusBadRequest, Type: ProblemInvalidKey, Title: "Invalid Idempotency-Key header", Detail: "The Idempotency-Key header is not valid."}
	case errors.Is(err, idempotent.ErrPayloadMismatch):
		return problem{Status: http.StatusUnprocessableEntity, Type: ProblemPayloadMismatch, Title: "Idempotency-Key already used",
			Detail: "This Idempotency-Key was already used for a different request (method, path, query or body). Use a new key for a new request."}
	case errors.Is(err, idempotent.ErrInProgress):
		return problem{Status: http.StatusConflict, Type: ProblemInProgress, Title: "A request with this Idempotency-Key is in progress",
			Detail: "A request with the same Idempotency-Key is still being processed. Retry after the Retry-After delay to get its response.", RetryAfter: retryAfter}
	case errors.Is(err, idempotent.ErrResponseNotStored):
		return notStoredProblem()
	case errors.Is(err, idempotent.ErrCorruptRecord):
		return problem{Status: http.StatusInternalServerError, Type: ProblemCorruptRecord, Title: "Idempotency record unreadable",
			Detail: "The stored record for this Idempotency-Key cannot be read."}
	case errors.Is(err, idempotent.ErrTxAborted):
		// The request conflicts with the current state (a write's condition
		// failed, stock would go negative): nothing committed, the record was
		// released. Retrying at once would meet the same state: no Retry-After.
		return problem{Status: http.StatusConflict, Type: ProblemTxAborted, Title: "Request conflicts with the current state",
			Detail: "The request's writes could not commit (a condition on the current state failed), so nothing was changed. It may be retried with the same Idempotency-Key once the state allows it."}
	case errors.Is(err, idempotent.ErrTxRefused):
		// A configuration error (a table that does not exist, a role without
		// access, a server without transactions): not an outage, so no
		// Retry-After. Nothing committed and the record was released.
		return problem{Status: http.StatusInternalServerError, Type: ProblemTxRefused, Title: "Request could not be committed",
			Detail: "The service's database refused the request's writes, so nothing was changed. Retrying will not help until the service is fixed."}
	case errors.Is(err, idempotent.ErrStore):
		return problem{Status: http.StatusServiceUnavailable, Type: ProblemStoreUnavailable, Title: "Service temporarily unavailable",
			Detail: "The request could not be completed. Retry after the Retry-After delay with the same Idempotency-Key.", RetryAfter: retryAfter}
	}
	return internalProblem()
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
