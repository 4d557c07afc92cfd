package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// web is the net/http scene: the payments logic (payments.NewHTTPHandler)
// behind nethttp.Middleware on a loopback server, over the demo's store.
type web struct {
	url    string
	client *http.Client
	gate   *armedProcessor
	newKey string // the key of the web-new step
	// answers holds each request's answer by name, for the test.
	answers map[string]answer
	// added is the number of ledger items a step added: "new" (the web-new
	// step, its retry included), "concurrent" (the web-concurrent step).
	added map[string]int
}

// armedProcessor holds the next charge, once armed, until released: the
// first of the concurrent requests is held there while the others arrive.
type armedProcessor struct {
	payments.Processor
	mu               sync.Mutex
	entered, release chan struct{}
}

// arm makes the next Charge close entered and wait for release.
func (g *armedProcessor) arm() (entered, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	return g.entered, g.release
}

func (g *armedProcessor) Charge(ctx context.Context, key string, req payments.ChargeRequest) (payments.Charge, error) {
	g.mu.Lock()
	entered, release := g.entered, g.release
	g.entered, g.release = nil, nil
	g.mu.Unlock()
	if entered != nil {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return payments.Charge{}, ctx.Err()
		}
	}
	return g.Processor.Charge(ctx, key, req)
}

// webStory serves the payments API on 127.0.0.1:0 for the length of the
// scene and drives it with a real http.Client.
func (d *demo) webStory(ctx context.Context) error {
	d.web = &web{gate: &armedProcessor{Processor: d.processor}, answers: map[string]answer{}, added: map[string]int{}}
	idem := nethttp.Middleware(payments.Engine(d.store, idempotent.WithOutcomeHook(d.hook("payments"))))
	mux := http.NewServeMux()
	mux.Handle("POST "+payments.Path, idem(payments.NewHTTPHandler(d.web.gate, d.client, d.tables.Payments)))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	transport := &http.Transport{}
	d.web.url, d.web.client = "http://"+ln.Addr().String(), &http.Client{Transport: transport, Timeout: paymentsTimeout}
	defer func() {
		transport.CloseIdleConnections()
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(stop)
		<-served
	}()

	fmt.Fprintf(d.w, "\nThe same payments API as a net/http server: payments.NewHTTPHandler behind nethttp.Middleware,\n"+
		"same DynamoDB store, on %s, driven by a real http.Client\n", d.web.url)
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"web-new", d.webNew}, {"web-concurrent", d.webConcurrent},
		{"web-different-body", d.webDifferentBody}, {"web-missing-key", d.webMissingKey},
	} {
		d.begin(step.name)
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// post sends POST /payments with body and key (none if empty), and notes
// which step created a payment.
func (d *demo) post(ctx context.Context, name, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.web.url+payments.Path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(nethttp.HeaderIdempotencyKey, key)
	}
	resp, err := d.web.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	headers := map[string]string{}
	for k := range resp.Header {
		headers[k] = resp.Header.Get(k)
	}
	a := newAnswer(events.APIGatewayV2HTTPResponse{StatusCode: resp.StatusCode, Headers: headers, Body: string(raw)})
	d.mu.Lock()
	defer d.mu.Unlock()
	if a.status == 201 && !a.replayed {
		d.paidIn[a.payment.PaymentID] = d.cur
	}
	d.web.answers[name] = a
	return a, nil
}

func (d *demo) webNew(ctx context.Context) error {
	key, body := freshKey(), sample(samples.PaymentNew).Body
	d.web.newKey = key
	before, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	a, err := d.post(ctx, "new", key, body)
	if err != nil {
		return err
	}
	d.line("POST, new key", a.String(), a.status == 201 && !a.replayed)
	b, err := d.post(ctx, "retry", key, body)
	if err != nil {
		return err
	}
	after, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	d.web.added["new"] = after - before
	d.line("the same POST again (a client retry)", b.String(),
		b.status == 201 && b.replayed && b.body == a.body && after-before == 1)
	d.detail("byte-identical body, served from DynamoDB: the handler did not run")
	return nil
}

func (d *demo) webConcurrent(ctx context.Context) error {
	key, body := freshKey(), sample(samples.PaymentNew).Body
	before, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	entered, release := d.web.gate.arm()
	type result struct {
		a   answer
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		a, err := d.post(ctx, "first", key, body)
		firstDone <- result{a, err}
	}()
	var first result
	held := true
	select { // the first request reaches its ledger write, and waits there
	case <-entered:
	case first = <-firstDone:
		held = false // it never got there: its answer is reported below
	}
	dups := concurrent - 1
	answers := make([]answer, dups)
	errs := make([]error, dups)
	var wg sync.WaitGroup
	for i := range dups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = d.post(ctx, fmt.Sprint("duplicate", i), key, body)
		}()
	}
	wg.Wait()
	close(release)
	if held {
		first = <-firstDone
	}
	if err := errors.Join(append(errs, first.err)...); err != nil {
		return err
	}
	conflicts, retryAfter := 0, ""
	for _, a := range answers {
		if a.status == 409 && a.retry != "" {
			conflicts++
			retryAfter = a.retry
		}
	}
	d.line(fmt.Sprintf("%d duplicates while the first is running", dups),
		fmt.Sprintf("%d× 409 in-progress (Retry-After: %s)", conflicts, retryAfter), held && conflicts == dups)
	d.detail("the first was held at its charge by a gate, then released:")
	d.detail("first request → %s", first.a)
	if !(first.a.status == 201 && !first.a.replayed) {
		d.line("the first request", first.a.String(), false)
	}
	retry, err := d.post(ctx, "after409", key, body)
	if err != nil {
		return err
	}
	d.detail("a 409'd client retries → %s", retry)
	if !(retry.status == 201 && retry.replayed && retry.payment.PaymentID == first.a.payment.PaymentID) {
		d.line("retry after 409", retry.String(), false)
	}
	after, err := d.ledgerCount(ctx)
	if err != nil {
		return err
	}
	d.web.added["concurrent"] = after - before
	d.detail("%d requests with one key: %d new ledger item", concurrent+1, after-before)
	if after-before != 1 {
		d.line("ledger items added", fmt.Sprint(after-before), false)
	}
	return nil
}

func (d *demo) webDifferentBody(ctx context.Context) error {
	a, err := d.post(ctx, "differentBody", d.web.newKey, sample(samples.PaymentDifferentBody).Body)
	if err != nil {
		return err
	}
	d.line(fmt.Sprintf("step %d's key, amount 9900, not 2500", stepNumber("web-new")), a.String(), a.status == 422 && a.problem == "payload-mismatch")
	return nil
}

func (d *demo) webMissingKey(ctx context.Context) error {
	a, err := d.post(ctx, "missingKey", "", sample(samples.PaymentNew).Body)
	if err != nil {
		return err
	}
	d.line("no Idempotency-Key header", a.String(), a.status == 400 && a.problem == "missing-key")
	return nil
}
