package nethttp

import "net/http"

// Fail answers a request whose handler failed with err: as a panic would,
// but as a value. Behind Middleware, on a request with a key, the run fails
// with err, which is the outcome's error (idempotent.OutcomeHandlerError):
// the record is released, or suspended when it holds steps, so a retry runs
// the handler again, and the client gets 500 internal-error without the
// error's text. Anywhere else (no key, no middleware) it answers 500
// internal-error at once.
//
// Fail writes nothing that the handler wrote before it: call it instead of
// writing a response, not after. It does not log err: the handler logs what
// it must. w may wrap the middleware's writer if it has an
// Unwrap() http.ResponseWriter method, as for http.ResponseController.
func Fail(w http.ResponseWriter, err error) {
	for rw := w; ; {
		if c, ok := rw.(*capture); ok && !c.direct {
			if c.failed == nil {
				c.failed = err
			}
			return
		}
		u, ok := rw.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		rw = u.Unwrap()
	}
	writeProblem(w, internalProblem())
}

// Refuse answers 400 malformed-request (ProblemMalformedRequest) with reason,
// a sentence safe to show the client, as its detail, for a request that
// cannot be served at all: a front door that translates other events into
// net/http requests (package apigateway) answers with it an event it cannot
// translate, before any handler runs.
func Refuse(w http.ResponseWriter, reason string) {
	p, _ := refusal(&requestError{Reason: reason})
	writeProblem(w, p)
}
