package payments

import (
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// MaxBody is the largest request body NewHTTPHandler reads: 6 MiB, Lambda's
// limit on a synchronous request.
const MaxBody = 6 << 20

// NewHTTPHandler returns the payments function's logic (POST /payments,
// charging through processor and recording each payment in the ledger table,
// as New does) as a net/http handler, without idempotency: wrap it with nethttp.Middleware on
// Engine(store) for the Lambda function's settings. It
// answers as New's handler does, problem types included; a ledger failure is
// answered 500, which the middleware does not store, so the client's retry
// runs again. The payment ID comes from idempotent.DownstreamKey of the
// request's context, which the middleware sets.
func NewHTTPHandler(processor Processor, ledger Ledger, table string) http.Handler {
	h := newHandler(processor, ledger, table, NewPaymentID)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			writeResponse(w, invalidRequest(&ValidationError{Params: []InvalidParam{{Reason: "the request body could not be read: " + err.Error()}}}))
			return
		}
		ev := events.APIGatewayV2HTTPRequest{
			RawPath:        r.URL.Path,
			RawQueryString: r.URL.RawQuery,
			Headers:        make(map[string]string, len(r.Header)),
			Body:           string(body),
		}
		for k, v := range r.Header {
			ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		ev.RequestContext.HTTP.Method = r.Method
		ev.RequestContext.HTTP.Path = r.URL.Path
		resp, err := h.serve(r.Context(), ev)
		if err != nil {
			slog.ErrorContext(r.Context(), "payments: the request failed", slog.String("error", err.Error()))
			writeResponse(w, problemResponse(problem{
				Type:   nethttp.ProblemInternal,
				Title:  "Internal server error",
				Status: http.StatusInternalServerError,
				Detail: "The request could not be processed. It may be retried with the same Idempotency-Key.",
			}))
			return
		}
		writeResponse(w, resp)
	})
}

// writeResponse writes an answer of serve (never base64-encoded).
func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}
