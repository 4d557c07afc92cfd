package payments_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// request is payments-new.json, with fn applied.
func request(t *testing.T, fn func(*events.APIGatewayV2HTTPRequest)) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev, err := samples.HTTP(samples.PaymentNew)
	require.NoError(t, err)
	if fn != nil {
		fn(&ev)
	}
	return ev
}

type problem struct {
	Type          string                  `json:"type"`
	Status        int                     `json:"status"`
	InvalidParams []payments.InvalidParam `json:"invalid-params"`
}

func decodeProblem(t *testing.T, resp events.APIGatewayV2HTTPResponse) problem {
	t.Helper()
	assert.Equal(t, nethttp.ContentTypeProblem, resp.Headers["Content-Type"])
	var p problem
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &p), resp.Body)
	assert.Equal(t, resp.StatusCode, p.Status)
	return p
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(*events.APIGatewayV2HTTPRequest)
		status  int
		problem string
		header  [2]string // a header the answer must carry
	}{
		{name: "created", status: http.StatusCreated},
		{name: "charset parameter", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.Headers["content-type"] = "application/json; charset=utf-8"
		}, status: http.StatusCreated},
		{name: "base64 body", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(ev.Body)), true
		}, status: http.StatusCreated},
		{name: "bad base64", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			// Valid JSON, so the adapter passes it on; not base64.
			ev.Body, ev.IsBase64Encoded = `"not base64!"`, true
		}, status: http.StatusBadRequest, problem: payments.ProblemInvalidRequest},
		{name: "text body", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.Headers["content-type"] = "text/plain"
		}, status: http.StatusUnsupportedMediaType, problem: payments.ProblemUnsupportedMediaType, header: [2]string{"Accept-Post", "application/json"}},
		{name: "no content type", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			delete(ev.Headers, "content-type")
		}, status: http.StatusUnsupportedMediaType, problem: payments.ProblemUnsupportedMediaType},
		{name: "other path", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RequestContext.HTTP.Path = "/refunds", "/refunds"
		}, status: http.StatusNotFound, problem: payments.ProblemNotFound},
		{name: "GET", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.HTTP.Method = http.MethodGet
		}, status: http.StatusMethodNotAllowed, problem: payments.ProblemMethodNotAllowed, header: [2]string{"Allow", "POST"}},
		{name: "invalid body", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.Body = `{"customerId":"cus_1","amount":0,"currency":"EUR"}`
		}, status: http.StatusBadRequest, problem: payments.ProblemInvalidRequest},
		{name: "missing key", mutate: func(ev *events.APIGatewayV2HTTPRequest) {
			delete(ev.Headers, "idempotency-key")
		}, status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ledger := &e2e.MemoryTables{}
			handler := payments.New(idempotent.NewMemoryStore(), &payments.LocalProcessor{}, ledger, "ledger")
			resp, err := handler(t.Context(), request(t, tt.mutate))
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode, resp.Body)
			if tt.header[0] != "" {
				assert.Equal(t, tt.header[1], resp.Headers[tt.header[0]])
			}
			items, _ := ledger.Ledger(t.Context())
			if tt.problem != "" {
				assert.Equal(t, tt.problem, decodeProblem(t, resp).Type)
				assert.Equal(t, "no-store", resp.Headers["Cache-Control"])
				assert.Empty(t, items, "nothing recorded")
				return
			}
			var pay payments.Payment
			require.NoError(t, json.Unmarshal([]byte(resp.Body), &pay))
			assert.Equal(t, payments.Payment{PaymentID: pay.PaymentID, CustomerID: "cus_NffrFeUfNV2Hib", Amount: 2500, Currency: "EUR", Status: "captured"}, pay)
			assert.Equal(t, "/payments/"+pay.PaymentID, resp.Headers["Location"])
			assert.Equal(t, "application/json", resp.Headers["Content-Type"])
			require.Len(t, items, 1)
			assert.Equal(t, pay, items[0].Payment)
		})
	}
}

func TestInvalidBodyIsReplayed(t *testing.T) {
	t.Parallel()
	ledger := &e2e.MemoryTables{}
	handler := payments.New(idempotent.NewMemoryStore(), &payments.LocalProcessor{}, ledger, "ledger")
	invalid := request(t, func(ev *events.APIGatewayV2HTTPRequest) {
		ev.Body = `{"customerId":"cus_1","amount":12.5,"currency":"EUR"}`
	})

	first, err := handler(t.Context(), invalid)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, first.StatusCode)
	assert.Equal(t, []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50, without a fraction or exponent"}},
		decodeProblem(t, first).InvalidParams)

	again, err := handler(t.Context(), invalid)
	require.NoError(t, err)
	assert.Equal(t, first.Body, again.Body)
	assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])

	// The corrected body needs a new key.
	fixed, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, fixed.StatusCode)
}

// TestLedgerFailure: a failed side effect is a 500 that releases the key,
// so the client's retry records the payment, once.
func TestLedgerFailure(t *testing.T) {
	t.Parallel()
	proc := &payments.LocalProcessor{}
	var calls atomic.Int32
	ledger := &e2e.MemoryTables{Fail: func(string) error {
		if calls.Add(1) == 1 {
			return errors.New("ProvisionedThroughputExceededException")
		}
		return nil
	}}
	handler := payments.New(idempotent.NewMemoryStore(), proc, ledger, "ledger")

	failed, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err, "the adapter answers, it never fails")
	assert.Equal(t, http.StatusInternalServerError, failed.StatusCode)
	assert.Equal(t, nethttp.ProblemInternal, decodeProblem(t, failed).Type)
	assert.NotContains(t, failed.Body, "ProvisionedThroughput", "internal errors are not shown")

	retried, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, retried.StatusCode)
	assert.Empty(t, retried.Headers[nethttp.HeaderReplayed])
	items, _ := ledger.Ledger(t.Context())
	assert.Len(t, items, 1)
	assert.Equal(t, 1, proc.Calls(), "the retry resumed after the recorded charge")
}

// crashingStore loses every completion, as if the process died between the
// side effect and the completion: the record stays in progress until its
// lease ends.
type crashingStore struct{ storage.StepStore }

func (crashingStore) Complete(context.Context, storage.Record) error {
	return errors.New("test: process crashed")
}

// TestTakeoverRecordsOnePayment: after a crash and a takeover, which runs
// the handler again by design, the ledger still holds one payment: the run's
// payment ID comes from the downstream key, so its conditional write finds
// the first run's item, and the answer is that payment.
func TestTakeoverRecordsOnePayment(t *testing.T) {
	t.Parallel()
	proc := &payments.LocalProcessor{}
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	ledger := &e2e.MemoryTables{}
	handler := payments.New(crashingStore{idempotent.NewMemoryStore()}, proc, ledger, "ledger",
		idempotent.WithClock(clock))

	ctx, cancel := context.WithTimeout(t.Context(), e2e.PaymentsTimeout)
	defer cancel()
	first, err := handler(ctx, request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.StatusCode)

	busy, err := handler(ctx, request(t, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, busy.StatusCode, "the crashed owner's lease is still live")

	offset.Store(int64(time.Minute)) // past the lease: function timeout plus clock skew
	second, err := handler(ctx, request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, second.StatusCode)
	assert.Empty(t, second.Headers[nethttp.HeaderReplayed], "the takeover ran the handler again")
	assert.JSONEq(t, first.Body, second.Body, "and answered with the payment the first run recorded")

	items, _ := ledger.Ledger(t.Context())
	require.Len(t, items, 1, "one payment")
	assert.Regexp(t, `^[0-9a-f]{32}$`, items[0].ProcessorKey)
	assert.Equal(t, 1, proc.Calls(), "the takeover resumed after the recorded charge")
}

// TestUnknownWriteOutcomeRecordsOnce: a ledger write that landed but
// answered an error makes the handler fail, so the key is released (500);
// the client's retry runs the handler again, and its write finds the
// payment already recorded: one payment, and the retry answers with it.
func TestUnknownWriteOutcomeRecordsOnce(t *testing.T) {
	t.Parallel()
	proc := &payments.LocalProcessor{}
	// The first write lands but answers an error, as one whose retries were
	// throttled, or that ran out of time, does.
	var writes atomic.Int32
	ledger := &e2e.MemoryTables{FailAfter: func(string) error {
		if writes.Add(1) == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}}
	handler := payments.New(idempotent.NewMemoryStore(), proc, ledger, "ledger", idempotent.WithLogger(slog.New(slog.DiscardHandler)))

	failed, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, failed.StatusCode)

	retried, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, retried.StatusCode, retried.Body)
	var p payments.Payment
	require.NoError(t, json.Unmarshal([]byte(retried.Body), &p))

	items, _ := ledger.Ledger(t.Context())
	require.Len(t, items, 1, "one payment")
	assert.Equal(t, items[0].Payment, p)
	assert.Equal(t, 1, proc.Calls(), "the retry resumed after the recorded charge")
}

// TestKeyReusedAfterExpiry: once a key's idempotency record has expired, the
// same request is recognized by the ledger (the same payment, not a second
// one), and another payment under the same key is refused with 422.
func TestKeyReusedAfterExpiry(t *testing.T) {
	t.Parallel()
	proc := &payments.LocalProcessor{}
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	ledger := &e2e.MemoryTables{}
	handler := payments.New(idempotent.NewMemoryStore(), proc, ledger, "ledger", idempotent.WithClock(clock))

	first, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.StatusCode)

	offset.Store(int64(payments.Expiry + time.Hour)) // the record has expired
	again, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, again.StatusCode)
	assert.Empty(t, again.Headers[nethttp.HeaderReplayed], "a new record: the handler ran")
	assert.JSONEq(t, first.Body, again.Body, "the same payment")

	offset.Store(int64(3*payments.Expiry + time.Hour)) // expired again
	other, err := handler(t.Context(), request(t, func(ev *events.APIGatewayV2HTTPRequest) {
		ev.Body = strings.Replace(ev.Body, "2500", "9900", 1)
	}))
	require.NoError(t, err)
	assert.Equal(t, payments.ProblemKeyReused, decodeProblem(t, other).Type)
	assert.Equal(t, http.StatusUnprocessableEntity, other.StatusCode)

	items, _ := ledger.Ledger(t.Context())
	require.Len(t, items, 1)
	assert.Equal(t, int64(2500), items[0].Amount)
	assert.Equal(t, 1, proc.Charges(), "the processor answered the same key with its charge, and refused another payment")
}

func TestNewPanicsOnMisconfiguration(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	assert.Panics(t, func() { payments.New(store, &payments.LocalProcessor{}, nil, "ledger") })
	assert.Panics(t, func() { payments.New(store, &payments.LocalProcessor{}, &e2e.MemoryTables{}, "") })
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	cfg, err := payments.ConfigFromEnv(env(map[string]string{"IDEMPOTENCY_TABLE": "idem", "PAYMENTS_TABLE": "pay"}))
	require.NoError(t, err)
	assert.Equal(t, payments.Config{IdempotencyTable: "idem", PaymentsTable: "pay"}, cfg)

	_, err = payments.ConfigFromEnv(env(nil))
	require.Error(t, err)
	assert.Equal(t, "boot: missing required environment variable(s): IDEMPOTENCY_TABLE, PAYMENTS_TABLE", err.Error())
}

func TestNewPaymentID(t *testing.T) {
	t.Parallel()
	a, b := payments.NewPaymentID(), payments.NewPaymentID()
	assert.Regexp(t, `^pay_[a-z2-7]{26}$`, a)
	assert.NotEqual(t, a, b)
}

func ExampleNew() {
	// In the function: dynamostore.New(client, table) and the DynamoDB client.
	store, ledger := idempotent.NewMemoryStore(), &e2e.MemoryTables{}
	handler := payments.New(store, &payments.LocalProcessor{}, ledger, "payments-ledger")

	ev, _ := samples.HTTP(samples.PaymentNew)
	for range 2 {
		resp, _ := handler(context.Background(), ev)
		fmt.Println(resp.StatusCode, resp.Headers["Idempotent-Replayed"] == "true")
	}
	items, _ := ledger.Ledger(context.Background())
	fmt.Println(len(items), "payment recorded")
	// Output:
	// 201 false
	// 201 true
	// 1 payment recorded
}
