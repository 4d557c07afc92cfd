package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// TestUnserializableResponse: a response the codec cannot encode. The
// handler ran (its side effect happened), so the record is completed without
// a response rather than released: the caller gets its value and
// ErrResponseEncoding, and a duplicate gets ErrResponseNotStored instead of
// running the side effect again.
func TestUnserializableResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var runs atomic.Int32
	var seen outcomes
	wrapped := idempotent.Wrap(idempotent.New(dynamostore.New(e.client, e.tables.Idempotency), seen.hook()), func(context.Context, charge) (map[string]float64, error) {
		runs.Add(1)
		return map[string]float64{"ratio": math.Inf(1)}, nil
	}, idempotent.WithKey(byID))
	in := charge{ID: newKey(t)}

	out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
	assert.Equal(t, math.Inf(1), out["ratio"], "the caller still gets the value")
	ev := seen.last(t)
	assert.Equal(t, idempotent.OutcomeNotStored, ev.Outcome)
	item := e.record(t, ev.RecordID)
	assert.Equal(t, string(storage.StatusCompleted), str(item, "status"))
	assert.Equal(t, []byte("n"), bin(item, "data"), "completed without a response")

	_, err = wrapped(ctxTimeout(t, 10*time.Second), in)
	require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
	assert.Equal(t, int32(1), runs.Load(), "the side effect is not repeated")
	assert.Empty(t, e.inProgress(t))
}

// TestRejectedInput: inputs whose key, scope or payload cannot be derived are
// refused with a typed error before anything is written.
func TestRejectedInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := dynamostore.New(e.client, e.tables.Idempotency)
	errBadInput := errors.New("test: no key in this input")
	type input struct {
		Key     string          `json:"key"`
		Scope   string          `json:"scope"`
		Payload json.RawMessage `json:"payload"`
	}
	var runs atomic.Int32
	wrapped := idempotent.Wrap(idempotent.New(store), func(context.Context, input) (string, error) {
		runs.Add(1)
		return "done", nil
	},
		idempotent.WithKey(func(in input) (string, error) {
			if in.Key == "reject" {
				return "", errBadInput
			}
			return in.Key, nil
		}),
		idempotent.WithScope(func(_ context.Context, in input) (string, error) {
			if in.Scope == "reject" {
				return "", errors.New("test: unknown caller")
			}
			return in.Scope, nil
		}),
		idempotent.WithPayloadValidation(func(in input) (any, error) { return in.Payload, nil }),
	)
	valid := json.RawMessage(`{"amount":1}`)
	tests := []struct {
		name string
		in   input
		want error // nil: accepted
	}{
		{"key function fails", input{Key: "reject", Payload: valid}, idempotent.ErrInvalidKey},
		{"empty key", input{Key: "", Payload: valid}, idempotent.ErrMissingKey},
		{"key over 1024 bytes", input{Key: strings.Repeat("k", 1024+1), Payload: valid}, idempotent.ErrInvalidKey},
		{"huge key", input{Key: strings.Repeat("k", 1<<20), Payload: valid}, idempotent.ErrInvalidKey},
		{"key not UTF-8", input{Key: "k\xff\xfe", Payload: valid}, idempotent.ErrInvalidKey},
		{"scope function fails", input{Key: "k-scope", Scope: "reject", Payload: valid}, idempotent.ErrInvalidKey},
		{"payload not JSON", input{Key: "k-payload", Payload: json.RawMessage(`not json`)}, idempotent.ErrInvalidPayload},
		{"payload with a duplicate key", input{Key: "k-dup", Payload: json.RawMessage(`{"a":1,"a":2}`)}, idempotent.ErrInvalidPayload},
		{"key of exactly 1024 bytes", input{Key: strings.Repeat("k", 1024), Payload: valid}, nil},
		{"key of multi-byte UTF-8 and NUL", input{Key: "ключ\x00🔑", Payload: valid}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runs.Load()
			itemsBefore := len(e.records(t))
			_, err := wrapped(ctxTimeout(t, 10*time.Second), tt.in)
			if tt.want == nil {
				require.NoError(t, err)
				assert.Equal(t, before+1, runs.Load())
				assert.Len(t, e.records(t), itemsBefore+1)
				for _, it := range e.records(t) {
					assert.NotContains(t, str(it, "id"), tt.in.Key, "the stored id is a hash, never the raw key")
				}
			} else {
				require.ErrorIs(t, err, tt.want)
				assert.Equal(t, before, runs.Load(), "the handler did not run")
				assert.Len(t, e.records(t), itemsBefore, "nothing written")
			}
			assert.Empty(t, e.inProgress(t))
		})
	}
}

// TestHandlerPanicReleases: a handler that panics has its record released
// (the panic then goes on), so no record is left INPROGRESS.
func TestHandlerPanicReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var seen outcomes
	wrapped := idempotent.Wrap(idempotent.New(dynamostore.New(e.client, e.tables.Idempotency), seen.hook()), func(context.Context, charge) (receipt, error) {
		panic("test: handler panic")
	}, idempotent.WithKey(byID))
	require.PanicsWithValue(t, "test: handler panic", func() {
		_, _ = wrapped(ctxTimeout(t, 10*time.Second), charge{ID: newKey(t)})
	})
	assert.Equal(t, idempotent.OutcomeHandlerError, seen.last(t).Outcome)
	assert.Empty(t, e.records(t))
}

// TestBadHTTPInput: requests the API Gateway adapter refuses get a typed
// problem and the right status before any record is written; bodies it
// cannot judge go to the handler. No record is ever left INPROGRESS.
func TestBadHTTPInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var runs atomic.Int32
	handler := apigateway.WrapV2(idempotent.New(dynamostore.New(e.client, e.tables.Idempotency)),
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"ok":true}`}, nil
		})
	withHeader := func(key, value string) func(*events.APIGatewayV2HTTPRequest) {
		return func(r *events.APIGatewayV2HTTPRequest) { r.Headers[key] = value }
	}
	withBody := func(body string) func(*events.APIGatewayV2HTTPRequest) {
		return func(r *events.APIGatewayV2HTTPRequest) { r.Body = body }
	}
	tests := []struct {
		name    string
		change  func(*events.APIGatewayV2HTTPRequest)
		status  int
		problem string // "" when the handler answers
	}{
		{"no key", func(r *events.APIGatewayV2HTTPRequest) { delete(r.Headers, "idempotency-key") }, 400, nethttp.ProblemMissingKey},
		{"empty key", withHeader("idempotency-key", ""), 400, nethttp.ProblemInvalidKey},
		{"blank key", withHeader("idempotency-key", "  \t "), 400, nethttp.ProblemInvalidKey},
		{"empty quoted key", withHeader("idempotency-key", `""`), 400, nethttp.ProblemInvalidKey},
		{"key of 256 bytes", withHeader("idempotency-key", strings.Repeat("k", nethttp.MaxKeyLength+1)), 400, nethttp.ProblemInvalidKey},
		{"huge key", withHeader("idempotency-key", strings.Repeat("k", 1<<20)), 400, nethttp.ProblemInvalidKey},
		{"non-ASCII key", withHeader("idempotency-key", "ключ"), 400, nethttp.ProblemInvalidKey},
		{"non-UTF-8 key", withHeader("idempotency-key", "k\xff"), 400, nethttp.ProblemInvalidKey},
		{"control character in key", withHeader("idempotency-key", "k\x00y"), 400, nethttp.ProblemInvalidKey},
		{"two keys", withHeader("idempotency-key", "a, b"), 400, nethttp.ProblemInvalidKey},
		{"badly quoted key", withHeader("idempotency-key", `"abc`), 400, nethttp.ProblemInvalidKey},
		{"truncated JSON body", withBody(`{"amount":`), 400, nethttp.ProblemInvalidJSON},
		{"body not JSON at all", withBody(`amount=1&currency=EUR`), 400, nethttp.ProblemInvalidJSON},
		{"JSON with a duplicate key", withBody(`{"amount":1,"amount":2}`), 400, nethttp.ProblemInvalidJSON},
		{"JSON nested too deeply", withBody(strings.Repeat("[", 600) + strings.Repeat("]", 600)), 400, nethttp.ProblemInvalidJSON},
		{"JSON body not UTF-8", withBody("{\"name\":\"\xff\"}"), 400, nethttp.ProblemInvalidJSON},
		{"key of 255 bytes", withHeader("idempotency-key", strings.Repeat("k", nethttp.MaxKeyLength)), 201, ""},
		{"text body", func(r *events.APIGatewayV2HTTPRequest) {
			r.Headers["content-type"] = "text/plain"
			r.Body = "amount=1"
		}, 201, ""},
		{"bad base64 body that is not JSON either", func(r *events.APIGatewayV2HTTPRequest) {
			r.Body, r.IsBase64Encoded = "%%%not base64", true
		}, 400, nethttp.ProblemInvalidJSON},
		{"bad base64 body that is JSON text", func(r *events.APIGatewayV2HTTPRequest) {
			r.Body, r.IsBase64Encoded = `"not base64!"`, true
		}, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httpRequest(newKey(t), `{"amount":1}`)
			tt.change(&req)
			before, itemsBefore := runs.Load(), len(e.records(t))
			resp, err := handler(ctxTimeout(t, 10*time.Second), req)
			require.NoError(t, err, "the adapter never returns an error")
			assert.Equal(t, tt.status, resp.StatusCode, resp.Body)
			if tt.problem != "" {
				assert.Equal(t, nethttp.ContentTypeProblem, resp.Headers["Content-Type"])
				var p struct{ Type, Detail string }
				require.NoError(t, json.Unmarshal([]byte(resp.Body), &p))
				assert.Equal(t, tt.problem, p.Type)
				if k := strings.TrimSpace(req.Headers["idempotency-key"]); k != "" {
					assert.NotContains(t, p.Detail, k, "problems never quote the key")
				}
				assert.Equal(t, before, runs.Load(), "the handler did not run")
				assert.Len(t, e.records(t), itemsBefore, "nothing written")
			} else {
				assert.Equal(t, before+1, runs.Load())
			}
			assert.Empty(t, e.inProgress(t))
		})
	}
}

// TestBadPaymentRequests sends the payments function's invalid samples (and
// a few more) through it on DynamoDB Local: each gets its typed problem, no
// payment is recorded, and no record is left INPROGRESS.
func TestBadPaymentRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	invoke := e2e.LocalInvoker(payments.New(dynamostore.New(e.client, e.tables.Idempotency), &payments.LocalProcessor{}, e.client, e.tables.Payments), e2e.PaymentsTimeout)
	p := e2e.NewPersonalize()
	tests := []struct {
		name    string
		sample  string
		change  func(*events.APIGatewayV2HTTPRequest)
		status  int
		problem string
	}{
		{"missing key", samples.PaymentMissingKey, nil, 400, nethttp.ProblemMissingKey},
		{"malformed JSON", samples.PaymentMalformedJSON, nil, 400, nethttp.ProblemInvalidJSON},
		{"amount zero", samples.PaymentInvalidAmountZero, nil, 400, payments.ProblemInvalidRequest},
		{"amount string", samples.PaymentInvalidAmountString, nil, 400, payments.ProblemInvalidRequest},
		{"amount fraction", samples.PaymentInvalidAmountFraction, nil, 400, payments.ProblemInvalidRequest},
		{"JSON array", samples.PaymentNew, func(r *events.APIGatewayV2HTTPRequest) { r.Body = `[1,2]` }, 400, payments.ProblemInvalidRequest},
		{"JSON null", samples.PaymentNew, func(r *events.APIGatewayV2HTTPRequest) { r.Body = `null` }, 400, payments.ProblemInvalidRequest},
		{"empty body", samples.PaymentNew, func(r *events.APIGatewayV2HTTPRequest) { r.Body = `` }, 400, payments.ProblemInvalidRequest},
		{"not JSON, as text", samples.PaymentNew, func(r *events.APIGatewayV2HTTPRequest) {
			r.Headers["content-type"] = "text/plain"
			r.Body = "pay me"
		}, 415, payments.ProblemUnsupportedMediaType},
		{"unknown field", samples.PaymentNew, func(r *events.APIGatewayV2HTTPRequest) {
			r.Body = `{"customerId":"cus_1","amount":1,"currency":"EUR","cardNumber":"4242424242424242"}`
		}, 400, payments.ProblemInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := samples.HTTP(tt.sample)
			require.NoError(t, err)
			ev = p.Payment(e2e.WithKey(ev, newKey(t)))
			if tt.sample == samples.PaymentMissingKey {
				delete(ev.Headers, "idempotency-key")
			}
			if tt.change != nil {
				tt.change(&ev)
			}
			in, err := json.Marshal(ev)
			require.NoError(t, err)
			out, err := invoke(t.Context(), in)
			require.NoError(t, err)
			var resp events.APIGatewayV2HTTPResponse
			require.NoError(t, json.Unmarshal(out, &resp))
			assert.Equal(t, tt.status, resp.StatusCode, resp.Body)
			var prob struct{ Type string }
			require.NoError(t, json.Unmarshal([]byte(resp.Body), &prob))
			assert.Equal(t, tt.problem, prob.Type)
			assert.NotContains(t, resp.Body, "4242424242424242", "the body is never echoed")
			assert.Empty(t, e.inProgress(t))
		})
	}
	assert.Empty(t, e.ledger(t), "no payment recorded")
}
