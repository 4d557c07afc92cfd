package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// suiteTimeout bounds each scenario, so a hung target fails instead of
// stalling the test binary until go test's own timeout.
const suiteTimeout = 2 * time.Minute

// Covered lists the sample events the suite sends; a test checks that it is
// every file in events/.
var Covered = []string{
	samples.PaymentNew, samples.PaymentReplay, samples.PaymentDifferentBody, samples.PaymentMissingKey,
	samples.PaymentInvalidAmountZero, samples.PaymentInvalidAmountString, samples.PaymentInvalidAmountFraction,
	samples.PaymentMalformedJSON, samples.PaymentSecondCaller,
	samples.OrdersBatch, samples.OrdersRedelivery,
}

// Run runs the suite against target: each scenario as a parallel subtest
// with its own Personalize suffix.
func Run(t *testing.T, target Target) {
	if target.Duplicates <= 0 {
		target.Duplicates = 16
	}
	if target.QueueWait <= 0 {
		target.QueueWait = 90 * time.Second
	}
	type named struct {
		name  string
		run   func(t *testing.T, s *scenario)
		extra time.Duration // beyond suiteTimeout
	}
	scenarios := []named{
		{"payments/story", paymentsStory, 0},
		{"payments/invalid bodies", paymentsInvalid, 0},
		{"payments/concurrent duplicates", paymentsConcurrent, 0},
		{"orders/batch and redelivery", ordersBatchAndRedelivery, 0},
		{"orders/concurrent batches", ordersConcurrent, 0},
	}
	if target.Queue != nil {
		scenarios = append(scenarios, named{"orders/through the queue", ordersThroughQueue, target.QueueWait + target.QueueSettle})
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout+sc.extra)
			defer cancel()
			s := &scenario{Target: target, ctx: ctx, p: NewPersonalize()}
			// The orders function reserves only what is in stock.
			for _, sku := range sampleSKUs {
				require.NoError(t, target.State.Restock(ctx, s.p.SKU(sku), SampleStock), "restock %s", sku)
			}
			sc.run(t, s)
		})
	}
}

// The sample events' SKUs, each given SampleStock units (personalized)
// before a scenario runs.
var sampleSKUs = []string{"SKU-RED-MUG", "SKU-BLUE-CAP"}

// SampleStock is the stock the suite gives each sample SKU of a run: more
// than every scenario reserves.
const SampleStock = 1000

// scenario is one subtest's view of the target.
type scenario struct {
	Target
	ctx context.Context
	p   Personalize
}

// httpAnswer is a payments answer with the parts the suite checks decoded.
type httpAnswer struct {
	events.APIGatewayV2HTTPResponse
	payment payments.Payment // for 201
	problem problemBody      // for 4xx and 5xx
}

type problemBody struct {
	Type          string                  `json:"type"`
	Title         string                  `json:"title"`
	Status        int                     `json:"status"`
	Detail        string                  `json:"detail"`
	InvalidParams []payments.InvalidParam `json:"invalid-params"`
}

func (a *httpAnswer) header(name string) string {
	for k, v := range a.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func (a *httpAnswer) replayed() bool { return a.header(nethttp.HeaderReplayed) == "true" }

// paymentEvent loads a payments sample made the scenario's own.
func (s *scenario) paymentEvent(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev, err := samples.HTTP(name)
	require.NoError(t, err)
	return s.p.Payment(ev)
}

// pay sends a payments event and decodes the answer. Any error is a test
// failure: the adapter answers every failure with an HTTP status.
func (s *scenario) pay(t *testing.T, ev events.APIGatewayV2HTTPRequest) httpAnswer {
	t.Helper()
	a, err := s.tryPay(ev)
	require.NoError(t, err)
	return a
}

// tryPay is pay for goroutines other than the test's: it returns errors.
func (s *scenario) tryPay(ev events.APIGatewayV2HTTPRequest) (httpAnswer, error) {
	var a httpAnswer
	in, err := json.Marshal(ev)
	if err != nil {
		return a, err
	}
	out, err := s.Payments(s.ctx, in)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(out, &a.APIGatewayV2HTTPResponse); err != nil {
		return a, err
	}
	if a.StatusCode == http.StatusCreated {
		err = json.Unmarshal([]byte(a.Body), &a.payment)
	} else if strings.HasPrefix(a.header("Content-Type"), nethttp.ContentTypeProblem) {
		err = json.Unmarshal([]byte(a.Body), &a.problem)
	}
	return a, err
}

// ledgerOf returns the ledger items of one customer.
func (s *scenario) ledgerOf(t *testing.T, customer string) []payments.LedgerItem {
	t.Helper()
	all, err := s.State.Ledger(s.ctx)
	require.NoError(t, err)
	var out []payments.LedgerItem
	for _, it := range all {
		if it.CustomerID == customer {
			out = append(out, it)
		}
	}
	return out
}

// assertCreated checks a first execution's answer and returns its payment.
func assertCreated(t *testing.T, a httpAnswer, customer string, amount int64) payments.Payment {
	t.Helper()
	require.Equal(t, http.StatusCreated, a.StatusCode, "body: %s", a.Body)
	assert.False(t, a.replayed(), "a first execution is not marked replayed")
	assert.Equal(t, "application/json", a.header("Content-Type"))
	assert.Regexp(t, `^pay_[a-z2-7]{26}$`, a.payment.PaymentID)
	assert.Equal(t, "/payments/"+a.payment.PaymentID, a.header("Location"))
	assert.Equal(t, payments.Payment{
		PaymentID: a.payment.PaymentID, CustomerID: customer, Amount: amount, Currency: "EUR", Status: payments.StatusCaptured,
	}, a.payment)
	return a.payment
}

// assertReplayOf checks that a is first replayed byte for byte.
func assertReplayOf(t *testing.T, first, a httpAnswer) {
	t.Helper()
	require.Equal(t, first.StatusCode, a.StatusCode, "body: %s", a.Body)
	assert.True(t, a.replayed(), "a replay carries %s: true", nethttp.HeaderReplayed)
	assert.Equal(t, first.Body, a.Body)
	for k, v := range first.Headers {
		assert.Equal(t, v, a.header(k), "header %s", k)
	}
}

func assertProblem(t *testing.T, a httpAnswer, status int, typ string) {
	t.Helper()
	require.Equal(t, status, a.StatusCode, "body: %s", a.Body)
	assert.Equal(t, nethttp.ContentTypeProblem, a.header("Content-Type"))
	assert.Equal(t, typ, a.problem.Type)
	assert.Equal(t, status, a.problem.Status)
}

// paymentsStory sends the payments samples in the order of events/README.md.
func paymentsStory(t *testing.T, s *scenario) {
	customer := s.p.Customer("cus_NffrFeUfNV2Hib")

	first := s.pay(t, s.paymentEvent(t, samples.PaymentNew))
	pay := assertCreated(t, first, customer, 2500)
	ledger := s.ledgerOf(t, customer)
	require.Len(t, ledger, 1)
	assert.Equal(t, pay, ledger[0].Payment)
	assert.Regexp(t, `^[0-9a-f]{32}$`, ledger[0].ProcessorKey, "the ledger item carries the downstream key")
	_, err := time.Parse(time.RFC3339, ledger[0].CreatedAt)
	assert.NoError(t, err, "createdAt is RFC 3339")

	replay := s.pay(t, s.paymentEvent(t, samples.PaymentReplay))
	assertReplayOf(t, first, replay)

	mismatch := s.pay(t, s.paymentEvent(t, samples.PaymentDifferentBody))
	assertProblem(t, mismatch, http.StatusUnprocessableEntity, nethttp.ProblemPayloadMismatch)
	assert.NotContains(t, mismatch.Body, pay.PaymentID, "a mismatch never sees the first answer")

	missing := s.pay(t, s.paymentEvent(t, samples.PaymentMissingKey))
	assertProblem(t, missing, http.StatusBadRequest, nethttp.ProblemMissingKey)

	bob := s.pay(t, s.paymentEvent(t, samples.PaymentSecondCaller))
	bobPay := assertCreated(t, bob, customer, 2500)
	assert.NotEqual(t, pay.PaymentID, bobPay.PaymentID, "another caller's same key is another payment")

	ledger = s.ledgerOf(t, customer)
	require.Len(t, ledger, 2, "one payment per caller, none per duplicate")
	assert.NotEqual(t, ledger[0].ProcessorKey, ledger[1].ProcessorKey, "downstream keys are scoped to the caller")

	again := s.pay(t, s.paymentEvent(t, samples.PaymentReplay))
	assertReplayOf(t, first, again)
	assert.Len(t, s.ledgerOf(t, customer), 2)
}

// paymentsInvalid sends the invalid bodies twice each: a validation answer
// is stored and replayed, a JSON syntax error is refused before anything is
// stored; neither records a payment.
func paymentsInvalid(t *testing.T, s *scenario) {
	for _, name := range []string{samples.PaymentInvalidAmountZero, samples.PaymentInvalidAmountString, samples.PaymentInvalidAmountFraction} {
		t.Run(name, func(t *testing.T) {
			first := s.pay(t, s.paymentEvent(t, name))
			assertProblem(t, first, http.StatusBadRequest, payments.ProblemInvalidRequest)
			require.Len(t, first.problem.InvalidParams, 1)
			assert.Equal(t, "amount", first.problem.InvalidParams[0].Name)
			assertReplayOf(t, first, s.pay(t, s.paymentEvent(t, name)))
		})
	}
	t.Run(samples.PaymentMalformedJSON, func(t *testing.T) {
		for range 2 {
			a := s.pay(t, s.paymentEvent(t, samples.PaymentMalformedJSON))
			assertProblem(t, a, http.StatusBadRequest, nethttp.ProblemInvalidJSON)
			assert.False(t, a.replayed(), "refused before a record was written")
		}
	})
	assert.Empty(t, s.ledgerOf(t, s.p.Customer("cus_NffrFeUfNV2Hib")))
}

// paymentsConcurrent sends many copies of one request at once: exactly one
// executes; every other gets 409 with Retry-After or a replay of its answer.
func paymentsConcurrent(t *testing.T, s *scenario) {
	ev := s.paymentEvent(t, samples.PaymentNew)
	answers := make([]httpAnswer, s.Duplicates)
	errs := make([]error, s.Duplicates)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range s.Duplicates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], errs[i] = s.tryPay(ev)
		}()
	}
	close(start)
	wg.Wait()

	var executed []httpAnswer
	var replays, inProgress int
	for i, a := range answers {
		require.NoError(t, errs[i])
		switch {
		case a.StatusCode == http.StatusCreated && !a.replayed():
			executed = append(executed, a)
		case a.StatusCode == http.StatusCreated:
			replays++
		case a.StatusCode == http.StatusConflict:
			assertProblem(t, a, http.StatusConflict, nethttp.ProblemInProgress)
			assert.NotEmpty(t, a.header("Retry-After"))
			inProgress++
		default:
			t.Errorf("unexpected answer %d: %s", a.StatusCode, a.Body)
		}
	}
	require.Len(t, executed, 1, "exactly one duplicate executes (%d replays, %d in progress)", replays, inProgress)
	for _, a := range answers {
		if a.StatusCode == http.StatusCreated {
			assert.Equal(t, executed[0].Body, a.Body, "every 201 is the same payment")
		}
	}
	assert.Len(t, s.ledgerOf(t, s.p.Customer("cus_NffrFeUfNV2Hib")), 1, "one ledger item")
	assertReplayOf(t, executed[0], s.pay(t, ev))
	t.Logf("%d duplicates at once: 1 executed, %d replayed, %d in progress (409)", s.Duplicates, replays, inProgress)
}

// ordersEvent loads an orders sample made the scenario's own.
func (s *scenario) ordersEvent(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	ev, err := samples.SQS(name)
	require.NoError(t, err)
	return s.p.Orders(ev)
}

// order sends an SQS event and returns the IDs of the failed messages, sorted.
func (s *scenario) order(t *testing.T, ev events.SQSEvent) []string {
	t.Helper()
	failed, err := s.tryOrder(ev)
	require.NoError(t, err)
	return failed
}

func (s *scenario) tryOrder(ev events.SQSEvent) ([]string, error) {
	in, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	out, err := s.Orders(s.ctx, in)
	if err != nil {
		return nil, err
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, err
	}
	failed := make([]string, 0, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	slices.Sort(failed)
	return failed, nil
}

// reserved returns the run's reserved counts by sample SKU.
func (s *scenario) reserved(t *testing.T) map[string]int64 {
	t.Helper()
	items, err := s.State.Inventory(s.ctx)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, sku := range sampleSKUs {
		for _, it := range items {
			if it.SKU == s.p.SKU(sku) {
				out[sku] = it.Reserved
			}
		}
	}
	return out
}

// The message IDs of the orders samples that must fail: the poison message
// (truncated JSON) and the invalid order (quantity 0).
const (
	poisonMessage  = "3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34"
	invalidMessage = "4f8d0a5c-1e6b-4c2d-9f7a-9b0c1d2e3f45"
)

func ordersBatchAndRedelivery(t *testing.T, s *scenario) {
	batch := s.ordersEvent(t, samples.OrdersBatch)
	assert.Equal(t, []string{poisonMessage, invalidMessage}, s.order(t, batch),
		"only the poison and the invalid message fail; the in-batch duplicate succeeds")
	assert.Equal(t, map[string]int64{"SKU-RED-MUG": 2, "SKU-BLUE-CAP": 1}, s.reserved(t),
		"order-1001 reserved once although delivered twice")

	redelivery := s.ordersEvent(t, samples.OrdersRedelivery)
	for range 2 {
		assert.Equal(t, []string{poisonMessage, invalidMessage}, s.order(t, redelivery))
		assert.Equal(t, map[string]int64{"SKU-RED-MUG": 3, "SKU-BLUE-CAP": 1}, s.reserved(t),
			"redelivered orders are not reserved again; only order-1005 is new")
	}
}

// ordersThroughQueue puts the batch's messages on the queue twice over (an
// in-batch duplicate, and every message again as a producer retry or SQS's
// at-least-once delivery would), and waits for the inventory: every valid
// order reserved exactly once. The poison and invalid messages fail until
// they reach the dead-letter queue.
func ordersThroughQueue(t *testing.T, s *scenario) {
	batch := s.ordersEvent(t, samples.OrdersBatch)
	bodies := make([]string, 0, 2*len(batch.Records))
	for _, m := range batch.Records {
		bodies = append(bodies, m.Body)
	}
	bodies = append(bodies, bodies...)
	require.NoError(t, s.Queue(s.ctx, bodies))
	s.awaitReserved(t, map[string]int64{"SKU-RED-MUG": 2, "SKU-BLUE-CAP": 1})
}

// awaitReserved polls the inventory until it shows want, then checks that it
// still does after the target's settle time.
func (s *scenario) awaitReserved(t *testing.T, want map[string]int64) {
	t.Helper()
	wait := s.QueueWait // Run sets the default
	deadline := time.Now().Add(wait)
	got := s.reserved(t)
	for !maps.Equal(got, want) && time.Now().Before(deadline) {
		select {
		case <-s.ctx.Done():
			require.NoError(t, s.ctx.Err(), "waiting for the queue's deliveries; last seen %v", got)
		case <-time.After(500 * time.Millisecond):
		}
		got = s.reserved(t)
	}
	require.Equal(t, want, got, "reservations after the queue's deliveries (waited up to %v)", wait)
	if s.QueueSettle > 0 {
		select {
		case <-s.ctx.Done():
		case <-time.After(s.QueueSettle):
		}
		assert.Equal(t, want, s.reserved(t), "still once each after %v", s.QueueSettle)
	}
}

// ordersConcurrent delivers the same batch to several invocations at once,
// as SQS may after a visibility timeout: every order is reserved once; a
// message whose order is in progress elsewhere fails, to be redelivered.
func ordersConcurrent(t *testing.T, s *scenario) {
	batch := s.ordersEvent(t, samples.OrdersBatch)
	const n = 4
	failed := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			failed[i], errs[i] = s.tryOrder(batch)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Subset(t, failed[i], []string{poisonMessage, invalidMessage})
	}
	assert.Equal(t, map[string]int64{"SKU-RED-MUG": 2, "SKU-BLUE-CAP": 1}, s.reserved(t))

	// The redelivery finds every order done (or finishes one that was in
	// progress): still nothing twice.
	assert.Equal(t, []string{poisonMessage, invalidMessage}, s.order(t, s.ordersEvent(t, samples.OrdersRedelivery)))
	assert.Equal(t, map[string]int64{"SKU-RED-MUG": 3, "SKU-BLUE-CAP": 1}, s.reserved(t))
}
