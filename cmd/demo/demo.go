package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/emf"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/internal/localddb"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// Function timeouts of the deployed stack (infra/stack.go): each invocation
// gets this deadline, from which its idempotency lease is derived.
const (
	paymentsTimeout = 10 * time.Second
	ordersTimeout   = 30 * time.Second
)

// demo holds the handlers under test and what their outcome hooks report.
type demo struct {
	w      io.Writer
	client *dynamodb.Client
	tables localddb.Tables
	store  *dynamostore.Store
	// processor is the payments function's card processor: it counts charges.
	processor *payments.LocalProcessor

	payments func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	orders   func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

	mu         sync.Mutex
	cur        string                      // the current step's number
	begun      []string                    // the names of the steps begun, in order (for TestDemo)
	numbered   bool                        // its number has been printed
	step       []idempotent.Event          // this step's outcomes
	byMsg      map[string]idempotent.Event // this step's orders outcomes by message ID
	totals     map[string]map[idempotent.Outcome]int
	stepsOf    map[idempotent.Outcome]map[string]bool // outcome → the steps that reported it
	recordStep map[string]string                      // record ID → the step that wrote it
	paidIn     map[string]string                      // paymentId → the step that created it
	failed     int                                    // steps that did not turn out as told
	firstPay   string
	web        *web           // the net/http scene
	receipts   *receiptsScene // the stream scene (receipts.go)

	emfLines bytes.Buffer            // what the functions' EMF metrics would log
	metrics  map[string]*emf.Metrics // per function
}

func newDemo(w io.Writer, client *dynamodb.Client, tables localddb.Tables) *demo {
	d := &demo{w: w, client: client, tables: tables, store: dynamostore.New(client, tables.Idempotency),
		totals:     map[string]map[idempotent.Outcome]int{"payments": {}, "orders": {}},
		recordStep: map[string]string{}, paidIn: map[string]string{}, stepsOf: map[idempotent.Outcome]map[string]bool{}}
	d.metrics = map[string]*emf.Metrics{}
	for _, fn := range []string{"payments", "orders"} {
		d.metrics[fn] = emf.New(&d.emfLines, func(o *emf.Options) { o.Dimensions = map[string]string{"FunctionName": fn} })
	}
	d.processor = &payments.LocalProcessor{}
	d.payments = payments.New(d.store, d.processor, client, tables.Payments, idempotent.WithOutcomeHook(d.hook("payments")))
	d.orders = orders.New(d.store, client, tables.Inventory, idempotent.WithOutcomeHook(d.hook("orders")))
	return d
}

// hook collects outcomes: per step, per SQS message and in total.
func (d *demo) hook(function string) func(context.Context, idempotent.Event) {
	return func(ctx context.Context, ev idempotent.Event) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.step = append(d.step, ev)
		d.totals[function][ev.Outcome]++
		if d.stepsOf[ev.Outcome] == nil {
			d.stepsOf[ev.Outcome] = map[string]bool{}
		}
		d.stepsOf[ev.Outcome][d.cur] = true
		d.metrics[function].Hook(ctx, ev)
		if _, seen := d.recordStep[ev.RecordID]; !seen && ev.RecordID != "" {
			d.recordStep[ev.RecordID] = d.cur
		}
		if m, ok := sqsbatch.MessageFromContext(ctx); ok {
			d.byMsg[m.MessageId] = ev
		}
	}
}

// begin starts the step named name (steps.go): it forgets the previous
// step's outcomes.
func (d *demo) begin(name string) {
	n := stepNumber(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cur, d.numbered, d.step, d.byMsg = fmt.Sprint(n), false, nil, map[string]idempotent.Event{}
	d.begun = append(d.begun, name)
}

func (d *demo) outcomes() []idempotent.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]idempotent.Event(nil), d.step...)
}

// invoke delivers an event the way lambda.Start does: JSON in, through
// lambda.NewHandler(handler).Invoke, JSON out, under the function's
// timeout. A Handler per call: the bytes Invoke returns alias a pooled
// buffer that a concurrent invocation of the same Handler could overwrite.
func invoke[Out any](ctx context.Context, handler any, timeout time.Duration, event any) (Out, error) {
	var out Out
	in, err := json.Marshal(event)
	if err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := lambda.NewHandler(handler).Invoke(ctx, in)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(raw, &out)
}

func (d *demo) pay(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (answer, error) {
	return d.payWith(ctx, d.payments, ev)
}

// payWith invokes a payments handler and notes which step created a payment.
func (d *demo) payWith(ctx context.Context, handler any, ev events.APIGatewayV2HTTPRequest) (answer, error) {
	resp, err := invoke[events.APIGatewayV2HTTPResponse](ctx, handler, paymentsTimeout, ev)
	a := newAnswer(resp)
	if err == nil && a.status == 201 && !a.replayed {
		d.mu.Lock()
		d.paidIn[a.payment.PaymentID] = d.cur
		d.mu.Unlock()
	}
	return a, err
}

func (d *demo) order(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return invoke[events.SQSEventResponse](ctx, d.orders, ordersTimeout, ev)
}

// answer is a payments response, decoded for printing.
type answer struct {
	status   int
	replayed bool
	payment  payments.Payment
	problem  string // the problem type's last path segment
	retry    string // Retry-After
	body     string
}

func newAnswer(r events.APIGatewayV2HTTPResponse) answer {
	a := answer{status: r.StatusCode, body: r.Body, replayed: r.Headers[nethttp.HeaderReplayed] == "true", retry: r.Headers["Retry-After"]}
	if r.StatusCode == 201 {
		_ = json.Unmarshal([]byte(r.Body), &a.payment)
		return a
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(r.Body), &p)
	a.problem = p.Type[strings.LastIndex(p.Type, "/")+1:]
	return a
}

// String is the answer in a few words: "201 pay_… executed".
func (a answer) String() string {
	switch {
	case a.status == 201 && a.replayed:
		return fmt.Sprintf("201 %s  replayed (Idempotent-Replayed: true)", a.payment.PaymentID)
	case a.status == 201:
		return fmt.Sprintf("201 %s  executed", a.payment.PaymentID)
	case a.replayed:
		return fmt.Sprintf("%d %s  replayed", a.status, a.problem)
	case a.retry != "":
		return fmt.Sprintf("%d %s  (Retry-After: %s)", a.status, a.problem, a.retry)
	default:
		return fmt.Sprintf("%d %s", a.status, a.problem)
	}
}

// width is the width of the "what was sent" column.
const width = 41

// line prints one line of a step: its number (on its first line only), what
// was sent, what came back, and a mark when that is not what the story says.
func (d *demo) line(what, result string, ok bool) {
	mark := ""
	if !ok {
		mark = "   ✗ unexpected"
		d.failed++
	}
	d.mu.Lock()
	n := d.cur
	if d.numbered {
		n = ""
	}
	d.numbered = true
	d.mu.Unlock()
	fmt.Fprintf(d.w, "%3s  %-*s → %s%s\n", n, width, what, result, mark)
}

// detail prints an indented explanation under a step's line.
func (d *demo) detail(format string, args ...any) {
	fmt.Fprintf(d.w, "%*s"+format+"\n", append([]any{5 + width + 3, ""}, args...)...)
}

func (d *demo) verdict() string {
	if d.failed > 0 {
		return fmt.Sprintf("%d step(s) did NOT turn out as expected", d.failed)
	}
	return "Every step turned out as expected"
}

func sample(name string) events.APIGatewayV2HTTPRequest {
	ev, err := samples.HTTP(name)
	if err != nil {
		panic(err) // the samples are embedded and tested
	}
	return ev
}

func withKey(ev events.APIGatewayV2HTTPRequest, key string) events.APIGatewayV2HTTPRequest {
	h := make(map[string]string, len(ev.Headers))
	for k, v := range ev.Headers {
		h[k] = v
	}
	h["idempotency-key"] = key
	ev.Headers = h
	return ev
}

func freshKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := hex.EncodeToString(b[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// ledgerCount is the number of payments in the ledger.
func (d *demo) ledgerCount(ctx context.Context) (int, error) {
	items, err := localddb.Scan[payments.LedgerItem](ctx, d.client, d.tables.Payments)
	return len(items), err
}
