package payments_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/testlog"
)

// urlEvent is a Function URL request for POST /payments, signed by iam
// (nil: a URL with auth type NONE).
func urlEvent(key, body string, iam *events.LambdaFunctionURLRequestContextAuthorizerIAMDescription) *events.LambdaFunctionURLRequest {
	ev := &events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: payments.Path,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": key},
		Body:    body,
	}
	ev.RequestContext.DomainName = "abc123.lambda-url.us-east-1.on.aws"
	ev.RequestContext.HTTP.Method = http.MethodPost
	ev.RequestContext.HTTP.Path = payments.Path
	if iam != nil {
		ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: iam}
	}
	return ev
}

var (
	alice = &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
		AccountID: "111122223333", CallerID: "AIDAALICE", UserARN: "arn:aws:iam::111122223333:user/alice", UserID: "AIDAALICE",
	}
	bob = &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
		AccountID: "111122223333", CallerID: "AROABOB:session", UserARN: "arn:aws:sts::111122223333:assumed-role/bob/session",
	}
	noARN = &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{AccountID: "444455556666", CallerID: "AIDANOARN"}
)

// urlAnswer is what the Function URL sends back: lambdaurl's streaming
// response, read whole.
type urlAnswer struct {
	status int
	header map[string]string
	body   string
}

// TestURLHandler serves payments.NewURLHandler through lambdaurl.Wrap, the
// function lambdaurl.Start hands to the runtime, so each request's context
// carries the Function URL event exactly as on Lambda.
func TestURLHandler(t *testing.T) {
	t.Parallel()
	ledger := &e2e.MemoryTables{}
	h := lambdaurl.Wrap(payments.NewURLHandler(idempotent.NewMemoryStore(), &payments.LocalProcessor{}, ledger, "ledger",
		idempotent.WithLogger(testlog.Logger(io.Discard))))
	invoke := func(ev *events.LambdaFunctionURLRequest) urlAnswer {
		t.Helper()
		resp, err := h(t.Context(), ev)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return urlAnswer{status: resp.StatusCode, header: resp.Headers, body: string(body)}
	}
	paymentID := func(a urlAnswer) string {
		t.Helper()
		var p payments.Payment
		require.NoError(t, json.Unmarshal([]byte(a.body), &p), a.body)
		return p.PaymentID
	}
	const key, body = "8e03978e-40d5-43e8-bc93-6894a57f9324", `{"customerId":"cus_NffrFeUfNV2Hib","amount":2500,"currency":"EUR"}`

	first := invoke(urlEvent(key, body, alice))
	require.Equal(t, http.StatusCreated, first.status, first.body)
	assert.Empty(t, first.header[nethttp.HeaderReplayed])

	again := invoke(urlEvent(key, body, alice))
	assert.Equal(t, http.StatusCreated, again.status)
	assert.Equal(t, "true", again.header[nethttp.HeaderReplayed], "Alice's retry is replayed")
	assert.Equal(t, first.body, again.body)

	other := invoke(urlEvent(key, body, bob))
	require.Equal(t, http.StatusCreated, other.status, other.body)
	assert.Empty(t, other.header[nethttp.HeaderReplayed], "Bob's key is his own, though Alice sent the same")
	assert.NotEqual(t, paymentID(first), paymentID(other))

	byID := invoke(urlEvent(key, body, noARN))
	require.Equal(t, http.StatusCreated, byID.status, byID.body)
	assert.Empty(t, byID.header[nethttp.HeaderReplayed])

	unsigned := invoke(urlEvent(key, body, nil))
	assert.Equal(t, http.StatusForbidden, unsigned.status)
	assert.Equal(t, nethttp.ContentTypeProblem, unsigned.header["Content-Type"])
	var p struct{ Type string }
	require.NoError(t, json.Unmarshal([]byte(unsigned.body), &p), unsigned.body)
	assert.Equal(t, payments.ProblemUnsigned, p.Type)

	missing := invoke(urlEvent("", body, alice))
	assert.Equal(t, http.StatusBadRequest, missing.status, "a signed request still needs its key")

	items, err := ledger.Ledger(t.Context())
	require.NoError(t, err)
	assert.Len(t, items, 3, "Alice, Bob and the caller without an ARN; not the replay, not the refused requests")
}

func TestURLCaller(t *testing.T) {
	t.Parallel()
	withEvent := func(iam *events.LambdaFunctionURLRequestContextAuthorizerIAMDescription) context.Context {
		// lambdaurl puts the event into the request's context; run its own
		// Wrap to get a context built exactly that way.
		var ctx context.Context
		h := lambdaurl.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
		resp, err := h(t.Context(), urlEvent("k", "{}", iam))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body) // the handler has returned once the body ends
		require.NoError(t, err)
		return ctx
	}
	tests := []struct {
		name    string
		ctx     context.Context
		want    string
		wantErr bool
	}{
		{name: "user", ctx: withEvent(alice), want: "iam:arn:aws:iam::111122223333:user/alice"},
		{name: "assumed role", ctx: withEvent(bob), want: "iam:arn:aws:sts::111122223333:assumed-role/bob/session"},
		{name: "no ARN", ctx: withEvent(noARN), want: "iam-caller:444455556666:AIDANOARN"},
		{name: "auth type NONE", ctx: withEvent(nil), wantErr: true},
		{name: "empty IAM context", ctx: withEvent(&events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{}), wantErr: true},
		{name: "not lambdaurl", ctx: t.Context(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := payments.URLCaller(tt.ctx)
			if tt.wantErr {
				require.Error(t, err)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
