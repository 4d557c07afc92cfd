package payments

import (
	"encoding/json"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// Problem types of the payments function's own answers, in the format of
// the idempotency adapter's (RFC 9457 problem details, served as
// application/problem+json with Cache-Control: no-store). The adapter's
// answers (missing or invalid key, in progress, payload mismatch, ...) keep
// their own types, nethttp.Problem*.
const (
	// ProblemInvalidRequest: 400, the body is not a valid payment request;
	// the member "invalid-params" lists every field at fault.
	ProblemInvalidRequest = "https://idemkit.dev/problems/payments/invalid-request"
	// ProblemUnsupportedMediaType: 415, the body is not sent as application/json.
	ProblemUnsupportedMediaType = "https://idemkit.dev/problems/payments/unsupported-media-type"
	// ProblemNotFound: 404, the path is not /payments.
	ProblemNotFound = "https://idemkit.dev/problems/payments/not-found"
	// ProblemMethodNotAllowed: 405, the method is not POST (Allow says so).
	ProblemMethodNotAllowed = "https://idemkit.dev/problems/payments/method-not-allowed"
	// ProblemKeyReused: 422, the ledger already holds a different payment
	// for this Idempotency-Key (sent again, with another body, after its
	// idempotency record expired).
	ProblemKeyReused = "https://idemkit.dev/problems/payments/key-reused"
)

// problem is an RFC 9457 problem details object, with the "invalid-params"
// extension member of the RFC's example.
type problem struct {
	Type          string         `json:"type"`
	Title         string         `json:"title"`
	Status        int            `json:"status"`
	Detail        string         `json:"detail,omitempty"`
	InvalidParams []InvalidParam `json:"invalid-params,omitempty"`
}

func problemResponse(p problem, extraHeaders ...string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(p) // strings, an int and a slice of strings always marshal
	headers := map[string]string{
		"Content-Type":  nethttp.ContentTypeProblem,
		"Cache-Control": "no-store",
	}
	for i := 0; i+1 < len(extraHeaders); i += 2 {
		headers[extraHeaders[i]] = extraHeaders[i+1]
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: p.Status, Headers: headers, Body: string(body)}
}

func invalidRequest(verr *ValidationError) events.APIGatewayV2HTTPResponse {
	return problemResponse(problem{
		Type:          ProblemInvalidRequest,
		Title:         "Invalid payment request",
		Status:        http.StatusBadRequest,
		Detail:        "The request body is not a valid payment request; see invalid-params. Send the corrected request with a new Idempotency-Key.",
		InvalidParams: verr.Params,
	})
}

func unsupportedMediaType() events.APIGatewayV2HTTPResponse {
	return problemResponse(problem{
		Type:   ProblemUnsupportedMediaType,
		Title:  "Unsupported media type",
		Status: http.StatusUnsupportedMediaType,
		Detail: "Send the payment request as a JSON object with Content-Type: application/json, with a new Idempotency-Key.",
	}, "Accept-Post", "application/json")
}

func notFound() events.APIGatewayV2HTTPResponse {
	return problemResponse(problem{
		Type:   ProblemNotFound,
		Title:  "Not found",
		Status: http.StatusNotFound,
		Detail: "This function serves POST " + Path + " only.",
	})
}

func keyReused() events.APIGatewayV2HTTPResponse {
	return problemResponse(problem{
		Type:   ProblemKeyReused,
		Title:  "Idempotency-Key already used for another payment",
		Status: http.StatusUnprocessableEntity,
		Detail: "This Idempotency-Key once recorded a payment with another customer, amount or currency. Use a new key for a new payment.",
	})
}

func methodNotAllowed() events.APIGatewayV2HTTPResponse {
	return problemResponse(problem{
		Type:   ProblemMethodNotAllowed,
		Title:  "Method not allowed",
		Status: http.StatusMethodNotAllowed,
		Detail: Path + " accepts POST only.",
	}, "Allow", http.MethodPost)
}
