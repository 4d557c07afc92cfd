package payments_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// TestHTTPHandler serves the payments logic through nethttp.Middleware on a
// real server: it answers as the Lambda handler does.
func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ledger := &e2e.MemoryTables{Fail: func(string) error {
		if calls.Add(1) == 1 {
			return errors.New("ProvisionedThroughputExceededException")
		}
		return nil
	}}
	idem := nethttp.Middleware(payments.Engine(idempotent.NewMemoryStore()))
	srv := httptest.NewServer(idem(payments.NewHTTPHandler(&payments.LocalProcessor{}, ledger, "ledger")))
	defer srv.Close()

	const body = `{"customerId":"cus_NffrFeUfNV2Hib","amount":2500,"currency":"EUR"}`
	post := func(path, contentType, key, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		if key != "" {
			req.Header.Set(nethttp.HeaderIdempotencyKey, key)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	problemType := func(body string) string {
		var p struct{ Type string }
		_ = json.Unmarshal([]byte(body), &p)
		return p.Type
	}

	const key = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	failed, failedBody := post(payments.Path, "application/json", key, body)
	assert.Equal(t, http.StatusInternalServerError, failed.StatusCode)
	assert.Equal(t, nethttp.ProblemInternal, problemType(failedBody))
	assert.NotContains(t, failedBody, "ProvisionedThroughput", "internal errors are not shown")

	first, firstBody := post(payments.Path, "application/json", key, body)
	require.Equal(t, http.StatusCreated, first.StatusCode, firstBody)
	assert.Empty(t, first.Header.Get(nethttp.HeaderReplayed))
	var p payments.Payment
	require.NoError(t, json.Unmarshal([]byte(firstBody), &p))
	assert.Equal(t, payments.Path+"/"+p.PaymentID, first.Header.Get("Location"))
	assert.Equal(t, int64(2500), p.Amount)

	again, againBody := post(payments.Path, "application/json", key, body)
	assert.Equal(t, http.StatusCreated, again.StatusCode)
	assert.Equal(t, "true", again.Header.Get(nethttp.HeaderReplayed))
	assert.Equal(t, firstBody, againBody)

	for _, tt := range []struct {
		name, path, contentType, body, problem string
		status                                 int
	}{
		{"invalid body", payments.Path, "application/json", `{"amount":0}`, payments.ProblemInvalidRequest, http.StatusBadRequest},
		{"text body", payments.Path, "text/plain", body, payments.ProblemUnsupportedMediaType, http.StatusUnsupportedMediaType},
		{"other path", "/refunds", "application/json", body, payments.ProblemNotFound, http.StatusNotFound},
	} {
		resp, b := post(tt.path, tt.contentType, "key-"+strings.ReplaceAll(tt.name, " ", "-"), tt.body)
		assert.Equal(t, tt.status, resp.StatusCode, tt.name)
		assert.Equal(t, tt.problem, problemType(b), tt.name)
	}
	items, _ := ledger.Ledger(t.Context())
	assert.Len(t, items, 1)
}
