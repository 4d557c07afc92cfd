package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/internal/lambdatest"
	"github.com/idemkit/idemkit/functions/internal/rie"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// The sample functions' main packages, as make build builds them.
const (
	paymentsMain    = "./functions/payments/cmd/bootstrap"
	paymentsURLMain = "./functions/payments/cmd/url"
	ordersMain      = "./functions/orders/cmd/bootstrap"
	receiptsMain    = "./functions/receipts/cmd/bootstrap"
)

// clockSkew is the engine's default clock-skew margin
// (idempotent.WithClockSkew), which the samples keep: a record's lease ends
// that long after the invocation's deadline.
const clockSkew = 2 * time.Second

// caseTimeout bounds each case under the emulator.
const caseTimeout = time.Minute

// TestEmulator runs the sample bootstraps, built as make build builds them
// (for this machine), under AWS's Lambda Runtime Interface Emulator, on
// DynamoDB Local: the suite through its invoke API, each function's own
// checks (answers, replays, JSON logs, EMF lines), and a handler that
// outlives the function's timeout. Run it under scripts/with-dynamodb.sh,
// after make rie.
func TestEmulator(t *testing.T) {
	t.Parallel()
	rie.Binary(t)
	client := localddbtest.Client(t)
	bins := rie.Build(t, paymentsMain, paymentsURLMain, ordersMain, receiptsMain)
	paymentsBin, paymentsURLBin, ordersBin, receiptsBin := bins[0], bins[1], bins[2], bins[3]
	functionEnv := func(name string, tables localddb.Tables, extra ...string) []string {
		return append([]string{
			"AWS_LAMBDA_FUNCTION_NAME=" + name,
			"IDEMPOTENCY_TABLE=" + tables.Idempotency,
			"PAYMENTS_TABLE=" + tables.Payments,
			"INVENTORY_TABLE=" + tables.Inventory,
		}, extra...)
	}

	// The suite, each function in four execution environments (so the
	// concurrent duplicates meet in four processes), with the deployed
	// stack's timeouts.
	t.Run("suite", func(t *testing.T) {
		t.Parallel()
		tables := localddbtest.Tables(t, client)
		pay := rie.NewPool(t, 4, rie.Config{Bootstrap: paymentsBin, Timeout: e2e.PaymentsTimeout,
			Env: functionEnv("idemkit-payments-rie", tables)})
		ord := rie.NewPool(t, 4, rie.Config{Bootstrap: ordersBin, Timeout: e2e.OrdersTimeout,
			Env: functionEnv("idemkit-orders-rie", tables)})
		e2e.Run(t, e2e.Target{
			Payments: pay.Invoke,
			Orders:   ord.Invoke,
			State:    e2e.DynamoState{Client: client, Tables: tables},
			Queue:    localQueue(t, ord.Invoke),
		})
	})

	// The function starts, answers, replays, and logs JSON: the core's
	// debug lines at AWS_LAMBDA_LOG_LEVEL=DEBUG.
	t.Run("payments", func(t *testing.T) {
		t.Parallel()
		ctx := caseContext(t)
		tables := localddbtest.Tables(t, client)
		emu := rie.Start(t, rie.Config{Bootstrap: paymentsBin, Timeout: e2e.PaymentsTimeout,
			Env: functionEnv("idemkit-payments-rie", tables, "AWS_LAMBDA_LOG_LEVEL=DEBUG")})
		event, err := samples.Read(samples.PaymentNew)
		require.NoError(t, err)
		var bodies []string
		for i := range 2 {
			resp := invokeHTTP(ctx, t, emu, event)
			require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
			assert.Equal(t, i == 1, resp.Headers[nethttp.HeaderReplayed] == "true")
			bodies = append(bodies, resp.Body)
		}
		assert.Equal(t, bodies[0], bodies[1])
		awaitOutput(t, emu, `"outcome":"replayed"`, 1, false, "the core's debug lines are logged at AWS_LAMBDA_LOG_LEVEL=DEBUG")
		assertJSONOutput(t, emu)
		assert.Contains(t, strings.Join(emu.FunctionOutput(), "\n"), `"msg":"payments: captured"`)
	})

	// The batch and its redelivery, with JSON logs.
	t.Run("orders", func(t *testing.T) {
		t.Parallel()
		ctx := caseContext(t)
		tables := localddbtest.Tables(t, client)
		state := e2e.DynamoState{Client: client, Tables: tables}
		for _, sku := range []string{"SKU-RED-MUG", "SKU-BLUE-CAP"} {
			require.NoError(t, state.Restock(ctx, sku, 100), "the function reserves only what is in stock")
		}
		emu := rie.Start(t, rie.Config{Bootstrap: ordersBin, Timeout: e2e.OrdersTimeout,
			Env: functionEnv("idemkit-orders-rie", tables)})
		for _, name := range []string{samples.OrdersBatch, samples.OrdersRedelivery} {
			event, err := samples.Read(name)
			require.NoError(t, err)
			out, err := emu.Invoke(ctx, event)
			require.NoError(t, err)
			var resp events.SQSEventResponse
			require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
			assert.Equal(t, []events.SQSBatchItemFailure{
				{ItemIdentifier: "3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34"},
				{ItemIdentifier: "4f8d0a5c-1e6b-4c2d-9f7a-9b0c1d2e3f45"},
			}, resp.BatchItemFailures, name)
		}
		awaitOutput(t, emu, `"msg":"orders: reserved"`, 3, true, "three orders reserved, each once")
		assertJSONOutput(t, emu)
		assert.Contains(t, strings.Join(emu.FunctionOutput(), "\n"), `"msg":"sqsbatch: message cannot be processed"`, "poison messages are logged")
	})

	// The sample stream batch and its redelivery send three receipts, each
	// once, with JSON logs and EMF lines.
	t.Run("receipts", func(t *testing.T) {
		t.Parallel()
		ctx := caseContext(t)
		tables := localddbtest.Tables(t, client)
		emu := rie.Start(t, rie.Config{Bootstrap: receiptsBin, Timeout: 30 * time.Second,
			Env: functionEnv("idemkit-receipts-rie", tables)})
		event, err := samples.Read(samples.DDBStreamsPayments)
		require.NoError(t, err)
		for range 2 {
			out, err := emu.Invoke(ctx, event)
			require.NoError(t, err)
			var resp events.DynamoDBEventResponse
			require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
			assert.Empty(t, resp.BatchItemFailures)
		}
		awaitOutput(t, emu, `"msg":"receipts: receipt done"`, 3, true, "three receipts, each once")
		assertJSONOutput(t, emu)
		output := strings.Join(emu.FunctionOutput(), "\n")
		assert.Equal(t, 3, strings.Count(output, `"msg":"receipts: receipt sent"`), "the mailer's lines")
		assert.Contains(t, output, `"_aws"`, "EMF metrics")
	})

	// The Function URL program (lambdaurl streams its answer: a JSON
	// prelude, eight NUL bytes, the body; the emulator returns the stream
	// whole): a signed caller's request is answered and its retry replayed,
	// and an unsigned one is refused.
	t.Run("payments-url", func(t *testing.T) {
		t.Parallel()
		ctx := caseContext(t)
		tables := localddbtest.Tables(t, client)
		emu := rie.Start(t, rie.Config{Bootstrap: paymentsURLBin, Timeout: e2e.PaymentsTimeout,
			Env: functionEnv("idemkit-payments-url-rie", tables)})
		invoke := func(signed bool) streamed {
			t.Helper()
			out, err := emu.Invoke(ctx, urlEvent(t, signed))
			require.NoError(t, err)
			return decodeStreamed(t, out)
		}
		first := invoke(true)
		require.Equal(t, http.StatusCreated, first.StatusCode, first.body)
		assert.Empty(t, first.Headers[nethttp.HeaderReplayed])
		again := invoke(true)
		assert.Equal(t, http.StatusCreated, again.StatusCode)
		assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
		assert.Equal(t, first.body, again.body)
		unsigned := invoke(false)
		assert.Equal(t, http.StatusForbidden, unsigned.StatusCode)
		assert.Contains(t, unsigned.body, payments.ProblemUnsigned)
		awaitOutput(t, emu, `"_aws"`, 1, false, "EMF metric lines")
		assertJSONOutput(t, emu)
	})

	t.Run("payments/killed at the timeout, resumed after the lease", func(t *testing.T) {
		t.Parallel()
		paymentsTimeout(t, client, paymentsBin, functionEnv)
	})
}

// paymentsTimeout: a payment whose handler, after the charge step is
// recorded, outlives the function's timeout (its runtime is stopped with
// SIGSTOP as its completion is about to reach DynamoDB) is killed by the
// emulator. Its record's lease ends the clock-skew margin after the
// deadline the emulator gave the runtime, not after the engine's maximum
// lease; a retry before then is answered 409, and the retry after it takes
// the record over, resumes after the charge step (the charge recorded by
// the killed run is the ledger's, charged once) and records one payment.
func paymentsTimeout(t *testing.T, client *dynamodb.Client, bootstrap string, functionEnv func(string, localddb.Tables, ...string) []string) {
	const timeout = 2 * time.Second
	ctx := caseContext(t)
	tables := localddbtest.Tables(t, client)
	proxy := newStallProxy(t, localddb.Endpoint(), "DynamoDB_20120810.TransactWriteItems")
	emu := rie.Start(t, rie.Config{Bootstrap: bootstrap, Timeout: timeout,
		Env: functionEnv("idemkit-payments-rie", tables, "AWS_ENDPOINT_URL_DYNAMODB="+proxy.URL)})
	proxy.setStall(emu.Freeze)

	p := e2e.NewPersonalize()
	ev, err := samples.HTTP(samples.PaymentNew)
	require.NoError(t, err)
	event, err := json.Marshal(p.Payment(ev))
	require.NoError(t, err)
	customer := p.Customer("cus_NffrFeUfNV2Hib")
	state := e2e.DynamoState{Client: client, Tables: tables}

	invoked := time.Now()
	_, err = emu.Invoke(ctx, event)
	answered := time.Now()
	require.ErrorIs(t, err, rie.ErrTimedOut, "the emulator kills the stuck runtime at the timeout")
	require.NoError(t, proxy.result(), "the runtime was stopped as it sent its completion")
	t.Logf("timed out after %v", answered.Sub(invoked).Round(time.Millisecond))

	store := dynamostore.New(client, tables.Idempotency)
	var recs []storage.Record
	require.NoError(t, store.Scan(ctx, storage.ScanOptions{}, func(r storage.Record, err error) bool {
		require.NoError(t, err)
		recs = append(recs, r)
		return true
	}))
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Equal(t, storage.StatusInProgress, rec.Status, "the killed run never completed")
	lease := rec.LeaseExpiresAt
	t.Logf("the lease ends %v after the invocation", lease.Sub(invoked).Round(time.Millisecond))
	// The emulator's deadline is timeout after it took the invocation: after
	// invoked, and no later than its timed-out answer. The lease ends the
	// clock-skew margin after it (to the millisecond), far before the
	// engine's maximum lease (15 minutes).
	assert.WithinRange(t, lease, invoked.Add(timeout+clockSkew-time.Millisecond), answered.Add(clockSkew+time.Millisecond),
		"the lease ends %v after the invocation (timeout %v, clock skew %v)", lease.Sub(invoked), timeout, clockSkew)
	require.Len(t, rec.Steps, 1, "the charge step was recorded before the hang")
	assert.Equal(t, payments.ChargeStep, rec.Steps[0].Name)
	var charge payments.Charge
	require.NoError(t, json.Unmarshal(rec.Steps[0].Data, &charge), "%s", rec.Steps[0].Data)
	require.NotEmpty(t, charge.ID)
	ledger, err := state.Ledger(ctx)
	require.NoError(t, err)
	assert.Empty(t, ledger, "the ledger row commits with the completion, which never reached DynamoDB")

	// Before the lease ends the record is still the killed run's; the
	// emulator starts a new runtime for the retry.
	busy := invokeAfterTimeout(ctx, t, emu, event)
	require.Equal(t, http.StatusConflict, busy.StatusCode, busy.Body)
	assert.NotEmpty(t, busy.Headers["Retry-After"])
	require.True(t, time.Now().Before(lease), "the 409 must come before the lease ends: retry sooner")

	time.Sleep(time.Until(lease) + 50*time.Millisecond)
	took := invokeHTTP(ctx, t, emu, event)
	require.Equal(t, http.StatusCreated, took.StatusCode, took.Body)
	assert.Empty(t, took.Headers[nethttp.HeaderReplayed], "the takeover ran the handler")
	ledger, err = state.Ledger(ctx)
	require.NoError(t, err)
	require.Len(t, ledger, 1, "one payment")
	assert.Equal(t, customer, ledger[0].CustomerID)
	// A new runtime has a new in-process processor: a charge made again
	// would have another ID.
	assert.Equal(t, charge.ID, ledger[0].ChargeID, "the takeover resumed after the recorded charge step")
	assert.Equal(t, charge.Key, ledger[0].ProcessorKey)

	replay := invokeHTTP(ctx, t, emu, event)
	assert.Equal(t, http.StatusCreated, replay.StatusCode)
	assert.Equal(t, "true", replay.Headers[nethttp.HeaderReplayed])
	assert.Equal(t, took.Body, replay.Body)
	awaitOutput(t, emu, `"msg":"payments: captured"`, 2, true, "the killed run and the takeover captured")
	assert.Contains(t, strings.Join(emu.FunctionOutput(), "\n"), `"currency":"EUR","took_over":true}`, "the takeover's log line")
}

// caseContext bounds a case under the emulator.
func caseContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// invokeHTTP invokes an HTTP API event and decodes the answer.
func invokeHTTP(ctx context.Context, t *testing.T, emu *rie.Emulator, event []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out, err := emu.Invoke(ctx, event)
	require.NoError(t, err)
	var resp events.APIGatewayV2HTTPResponse
	require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
	return resp
}

// invokeAfterTimeout is invokeHTTP for the first invocation after a
// timeout: the emulator may still be resetting its sandbox, and answer 502
// Sandbox.Failure (ErrGateCanceled) without starting a runtime; a client
// retries that.
func invokeAfterTimeout(ctx context.Context, t *testing.T, emu *rie.Emulator, event []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	for range 20 {
		out, err := emu.Invoke(ctx, event)
		if err != nil && strings.Contains(err.Error(), "502 Bad Gateway") && strings.Contains(err.Error(), "Sandbox.Failure") {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		require.NoError(t, err)
		var resp events.APIGatewayV2HTTPResponse
		require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
		return resp
	}
	t.Fatalf("the emulator still fails the sandbox after a second: %s", emu.Output())
	return events.APIGatewayV2HTTPResponse{}
}

// awaitOutput waits for want to appear at least n times in the runtimes'
// lines (the logs reach the emulator through a pipe, a moment after the
// answers); with exact, it must then appear exactly n times.
func awaitOutput(t *testing.T, emu *rie.Emulator, want string, n int, exact bool, msg string) {
	t.Helper()
	count := func() int { return strings.Count(strings.Join(emu.FunctionOutput(), "\n"), want) }
	require.Eventually(t, func() bool { return count() >= n }, 10*time.Second, 10*time.Millisecond, "%s: %s", msg, emu.Output())
	if exact {
		assert.Equal(t, n, count(), "%s", msg)
	}
}

// assertJSONOutput checks that every line the runtimes wrote is JSON.
func assertJSONOutput(t *testing.T, emu *rie.Emulator) {
	t.Helper()
	lines := emu.FunctionOutput()
	require.NotEmpty(t, lines)
	lambdatest.AssertJSONLines(t, strings.Join(lines, "\n"))
}

// stallProxy forwards to DynamoDB, except the first request for one
// operation (X-Amz-Target): for it, it calls the stall function and holds
// the request until the caller goes away, answering nothing.
type stallProxy struct {
	*httptest.Server

	mu      sync.Mutex
	stallFn func() error
	stalled bool
	err     error
}

func newStallProxy(t *testing.T, endpoint, target string) *stallProxy {
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	fwd := httputil.NewSingleHostReverseProxy(u)
	p := &stallProxy{}
	closing := make(chan struct{})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != target || !p.take() {
			fwd.ServeHTTP(w, r)
			return
		}
		// With the body read, the server watches the connection: the
		// context ends when the killed runtime's socket closes.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-closing:
		}
	}))
	t.Cleanup(func() {
		close(closing)
		p.Close()
	})
	return p
}

// take reports whether this request is the one to stall, and stalls.
func (p *stallProxy) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		return false
	}
	p.stalled = true
	if p.stallFn == nil {
		p.err = errors.New("no stall function set")
	} else {
		p.err = p.stallFn()
	}
	return true
}

func (p *stallProxy) setStall(fn func() error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallFn = fn
}

// result returns nil once the stall function ran and succeeded.
func (p *stallProxy) result() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		return errors.New("the proxy never saw the operation it stalls")
	}
	return p.err
}

// streamed is a response as lambdaurl streams it: a JSON prelude (status,
// headers, cookies), eight NUL bytes, then the body.
type streamed struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	body       string
}

func decodeStreamed(t *testing.T, raw []byte) streamed {
	t.Helper()
	prelude, body, ok := bytes.Cut(raw, make([]byte, 8))
	require.True(t, ok, "no prelude separator in %q", raw)
	var s streamed
	require.NoError(t, json.Unmarshal(prelude, &s), "%s", prelude)
	s.body = string(body)
	return s
}

// urlEvent is a Function URL request for POST /payments, signed by an IAM
// caller or not.
func urlEvent(t *testing.T, signed bool) []byte {
	t.Helper()
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: payments.Path,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": "c0ffee00-0000-4000-8000-000000000001"},
		Body:    `{"customerId":"cus_NffrFeUfNV2Hib","amount":2500,"currency":"EUR"}`,
	}
	ev.RequestContext.DomainName = "abc123.lambda-url.us-east-1.on.aws"
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = http.MethodPost, payments.Path
	if signed {
		ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				AccountID: "111122223333", CallerID: "AIDAALICE", UserARN: "arn:aws:iam::111122223333:user/alice",
			},
		}
	}
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	return b
}
