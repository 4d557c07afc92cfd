package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/functions/receipts"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// The load of TestStress. The defaults are the small version that runs in
// make test; make stress passes -stress.keys=500 -stress.workers=32. The
// environment variables STRESS_KEYS, STRESS_WORKERS and STRESS_COPIES set the
// defaults too.
var (
	stressKeys    = flag.Int("stress.keys", envInt("STRESS_KEYS", 50), "distinct idempotency keys per function")
	stressWorkers = flag.Int("stress.workers", envInt("STRESS_WORKERS", 8), "concurrent workers per function")
	stressCopies  = flag.Int("stress.copies", envInt("STRESS_COPIES", 4), "deliveries of each key")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// maxRetries bounds the retries of one delivery answered 409 or reported as
// a batch item failure.
const maxRetries = 100

// latencies collects invocation durations, safe for concurrent use.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// tally counts named events, safe for concurrent use.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *tally) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[name]++
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.m))
	for k := range c.m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, c.m[k])
	}
	return strings.Join(parts, " ")
}

// TestStress delivers every one of -stress.keys keys -stress.copies times, in
// random order and timing and partly at the same moment, through the real
// sample functions on DynamoDB Local, with -stress.workers workers: the
// payments function through its API Gateway v2 handler (invoked by
// lambda.NewHandler(...).Invoke), the orders function through SQS batches,
// and the receipts function through DynamoDB Streams batches redelivered from
// their checkpoints, with mail API failures injected, and a RabbitMQ consumer
// (rabbitmqbatch) whose failed batches come back whole. Exactly one side effect
// happens per key, no record is left INPROGRESS, and every duplicate is
// answered with the original response or a 409 / batch item failure that
// succeeds when retried.
func TestStress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := dynamostore.New(e.client, e.tables.Idempotency)
	run := e2e.NewPersonalize()
	t.Logf("stress: %d keys x %d deliveries, %d workers per function", *stressKeys, *stressCopies, *stressWorkers)
	t.Run("payments", func(t *testing.T) { stressPayments(t, e, store, string(run)) })
	t.Run("orders", func(t *testing.T) { stressOrders(t, e, store, string(run)) })
	t.Run("receipts", func(t *testing.T) { stressReceipts(t, e, store, string(run)) })
	t.Run("rabbitmq", func(t *testing.T) { stressRabbitMQ(t, store, string(run)) })
	assert.Empty(t, e.inProgress(t), "no record left INPROGRESS")
	for _, marker := range []string{"stresskey-" + string(run), "cus_stress_" + string(run), "ord-stress-" + string(run), "cus_rcpt_" + string(run)} {
		assert.NotContains(t, processLogs.String(), marker, "a raw key or payload reached the logs")
	}
}

// payJob is one or more simultaneous deliveries of a payment request.
type payJob struct {
	key    int
	copies int
}

func stressPayments(t *testing.T, e *env, store *dynamostore.Store, run string) {
	keys, workers := *stressKeys, *stressWorkers
	var seen outcomes
	invoke := e2e.LocalInvoker(payments.New(store, &payments.LocalProcessor{}, e.client, e.tables.Payments, seen.hook()), e2e.PaymentsTimeout)

	sample, err := samples.HTTP(samples.PaymentNew)
	require.NoError(t, err)
	requests := make([][]byte, keys)
	for i := range keys {
		ev := e2e.WithKey(sample, fmt.Sprintf("stresskey-%s-%d", run, i))
		ev.Body = fmt.Sprintf(`{"customerId":"cus_stress_%s_%d","amount":%d,"currency":"EUR"}`, run, i, 100+i)
		delete(ev.Headers, "content-length")
		requests[i], err = json.Marshal(ev)
		require.NoError(t, err)
	}
	// A third of the keys get two copies delivered at the same moment.
	var jobs []payJob
	for i := range keys {
		left := *stressCopies
		if i%3 == 0 && left >= 2 {
			jobs = append(jobs, payJob{i, 2})
			left -= 2
		}
		for range left {
			jobs = append(jobs, payJob{i, 1})
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	var (
		lat      latencies
		statuses tally
		mu       sync.Mutex
		payment  = make([]string, keys) // the paymentId each key must answer with
		execs    = make([]int, keys)
		retries  atomic.Int64
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	deliver := func(key int) {
		for attempt := 0; ; attempt++ {
			start := time.Now()
			out, err := invoke(context.Background(), requests[key])
			lat.add(time.Since(start))
			if err != nil {
				fail("key %d: invoke: %v", key, err)
				return
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				fail("key %d: %v", key, err)
				return
			}
			replayed := resp.Headers[nethttp.HeaderReplayed] == "true"
			switch {
			case resp.StatusCode == http.StatusCreated:
				statuses.add(map[bool]string{false: "201", true: "201 replayed"}[replayed])
				var p payments.Payment
				if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
					fail("key %d: %v", key, err)
					return
				}
				mu.Lock()
				if !replayed {
					execs[key]++
				}
				if payment[key] == "" {
					payment[key] = p.PaymentID
				} else if payment[key] != p.PaymentID {
					failures = append(failures, fmt.Sprintf("key %d: answered with %s and %s", key, payment[key], p.PaymentID))
				}
				mu.Unlock()
				return
			case resp.StatusCode == http.StatusConflict && strings.Contains(resp.Body, nethttp.ProblemInProgress) && attempt < maxRetries:
				statuses.add("409 in progress")
				retries.Add(1)
				time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond) // the client's backoff
			default:
				fail("key %d: %d %s", key, resp.StatusCode, resp.Body)
				return
			}
		}
	}

	start := time.Now()
	queue := make(chan payJob)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range queue {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				var burst sync.WaitGroup
				for range job.copies {
					burst.Add(1)
					go func() {
						defer burst.Done()
						deliver(job.key)
					}()
				}
				burst.Wait()
			}
		}()
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
	wall := time.Since(start)

	require.Empty(t, failures)
	for i, n := range execs {
		require.Equal(t, 1, n, "key %d executed %d times", i, n)
	}
	ledger := e.ledger(t)
	var mine []string
	for _, it := range ledger {
		if strings.HasPrefix(it.CustomerID, "cus_stress_"+run+"_") {
			mine = append(mine, it.PaymentID)
		}
	}
	slices.Sort(mine)
	want := slices.Clone(payment)
	slices.Sort(want)
	assert.Equal(t, want, mine, "exactly one ledger item per key, the one every answer names")
	report(t, "payments", keys*(*stressCopies), &lat, wall, statuses.String(), seen.counts(), retries.Load())
}

// ordMsg is one SQS delivery of an order.
type ordMsg struct {
	msg      events.SQSMessage
	attempts int
}

func stressOrders(t *testing.T, e *env, store *dynamostore.Store, run string) {
	keys, workers := *stressKeys, *stressWorkers
	var seen outcomes
	invoke := e2e.LocalInvoker(orders.New(store, e.client, e.tables.Inventory, seen.hook()), e2e.OrdersTimeout)

	// Each order is delivered as its first message, SQS redeliveries of it
	// (the same message id) and producer resends (new message ids).
	var pending []*ordMsg
	stock := e2e.DynamoState{Client: e.client, Tables: e.tables}
	for i := range keys {
		// The reservation commits with the order's completion, on stock:
		// one unit more than the order needs, so a second reservation would
		// succeed and show.
		require.NoError(t, stock.Restock(t.Context(), fmt.Sprintf("SKU-%s-%d", run, i), 2))
		body := fmt.Sprintf(`{"orderId":"ord-stress-%s-%d","sku":"SKU-%s-%d","quantity":1}`, run, i, run, i)
		for c := range *stressCopies {
			id := fmt.Sprintf("msg-%s-%d-%d", run, i, c)
			if c%2 == 1 {
				id = fmt.Sprintf("msg-%s-%d-%d", run, i, c-1) // a redelivery
			}
			pending = append(pending, &ordMsg{msg: events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs",
				EventSourceARN: "arn:aws:sqs:eu-west-1:000000000000:orders"}})
		}
	}
	rand.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })

	var (
		lat      latencies
		results  tally
		mu       sync.Mutex
		inFlight int
		retries  int
		failures []string
	)
	// take removes a batch of 1 to 10 messages from the queue; ok is false
	// when there is nothing left to do.
	take := func() (batch []*ordMsg, ok bool) {
		for {
			mu.Lock()
			if len(pending) > 0 {
				n := min(len(pending), 1+rand.IntN(10))
				batch, pending = pending[:n:n], pending[n:]
				inFlight++
				mu.Unlock()
				return batch, true
			}
			done := inFlight == 0
			mu.Unlock()
			if done {
				return nil, false
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				batch, ok := take()
				if !ok {
					return
				}
				ev := events.SQSEvent{Records: make([]events.SQSMessage, len(batch))}
				for i, m := range batch {
					ev.Records[i] = m.msg
				}
				in, _ := json.Marshal(ev)
				t0 := time.Now()
				out, err := invoke(context.Background(), in)
				lat.add(time.Since(t0))
				var resp events.SQSEventResponse
				if err == nil {
					err = json.Unmarshal(out, &resp)
				}
				failed := map[string]bool{}
				for _, f := range resp.BatchItemFailures {
					failed[f.ItemIdentifier] = true
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				}
				var again []*ordMsg
				for _, m := range batch {
					if !failed[m.msg.MessageId] {
						results.add("deleted")
						continue
					}
					results.add("batch item failure")
					m.attempts++
					if m.attempts > maxRetries {
						failures = append(failures, "message "+m.msg.MessageId+" kept failing")
						continue
					}
					retries++
					again = append(again, m)
				}
				mu.Unlock()
				if len(again) > 0 {
					// SQS makes a failed message visible again after its
					// visibility timeout; here, after a short while.
					time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
				}
				mu.Lock()
				pending = append(pending, again...)
				inFlight--
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	require.Empty(t, failures)

	reserved := map[string]int64{}
	for _, it := range scanAll(t, e.client, e.tables.Inventory) {
		if sku := str(it, "sku"); strings.HasPrefix(sku, "SKU-"+run+"-") {
			n, err := strconv.ParseInt(num(it, "reserved"), 10, 64)
			require.NoError(t, err)
			reserved[sku] = n
		}
	}
	require.Len(t, reserved, keys, "one inventory item per order")
	for sku, n := range reserved {
		require.Equal(t, int64(1), n, "%s reserved %d times", sku, n)
	}
	report(t, "orders", keys*(*stressCopies), &lat, wall, results.String(), seen.counts(), int64(retries))
}

// report prints a function's figures.
func report(t *testing.T, name string, deliveries int, lat *latencies, wall time.Duration, answers string, outcomes map[string]int, retries int64) {
	t.Helper()
	names := make([]string, 0, len(outcomes))
	for k := range outcomes {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d", k, outcomes[k])
	}
	t.Logf("stress %s: %d deliveries in %d invocations (%d retries) in %v (%.0f invocations/s); latency p50 %v p99 %v max %v",
		name, deliveries, lat.count(), retries, wall.Round(time.Millisecond), float64(lat.count())/wall.Seconds(),
		lat.quantile(0.50).Round(100*time.Microsecond), lat.quantile(0.99).Round(100*time.Microsecond), lat.quantile(1).Round(100*time.Microsecond))
	t.Logf("stress %s: answers: %s", name, answers)
	t.Logf("stress %s: idempotency outcomes:%s", name, b.String())
}

// receiptsTimeout is the receipts function's timeout in the stack.
const receiptsTimeout = 30 * time.Second

// stressReceipts streams -stress.keys payments (an INSERT each, and a MODIFY,
// a refund, of an earlier payment after every third) over -stress.workers
// shards of the payments table's stream to the receipts function. Each shard
// is read by -stress.copies consumers at once (a rewound shard, a mapping
// created again, a second mapping during a deploy), each in the shard's
// order, as Lambda reads a shard: in batches of 1 to 20 records, a batch
// whose response names a checkpoint delivered again from there until none is
// named. So consumers meet each other's keys in progress and done, and every
// checkpoint redelivers records already done. The mail API honours keys; it
// refuses the first send of every fifth payment, and loses the answer of a
// send of every seventh after sending. Every payment gets exactly one
// receipt.
func stressReceipts(t *testing.T, e *env, store *dynamostore.Store, run string) {
	keys, workers, copies := *stressKeys, *stressWorkers, *stressCopies
	shards := workers
	var seen outcomes
	mailer := &receipts.LocalMailer{}
	// The faults of payment i's sends, in order; the later sends succeed.
	faults := func(i int) (script []string) {
		if i%5 == 1 {
			script = append(script, "refuse")
		}
		if i%7 == 2 {
			script = append(script, "lose")
		}
		return script
	}
	var (
		wantRefused, wantLost int64
		calls                 sync.Map // payment ID → *atomic.Int64, its sends so far
		refused, lost         atomic.Int64
	)
	for i := range keys {
		for _, f := range faults(i) {
			if f == "refuse" {
				wantRefused++
			} else {
				wantLost++
			}
		}
	}
	faulty := receipts.MailerFunc(func(ctx context.Context, key string, r receipts.Receipt) (string, error) {
		n, _ := calls.LoadOrStore(r.PaymentID, new(atomic.Int64))
		k := int(n.(*atomic.Int64).Add(1)) - 1
		if script := faults(int(r.Amount - 100)); k < len(script) {
			switch script[k] {
			case "refuse":
				refused.Add(1)
				return "", errors.New("mailer: 503 service unavailable")
			case "lose":
				if _, err := mailer.Send(ctx, key, r); err != nil {
					return "", err
				}
				lost.Add(1)
				return "", errors.New("mailer: connection reset after the request was sent")
			}
		}
		return mailer.Send(ctx, key, r)
	})
	invoke := e2e.LocalInvoker(receipts.New(store, faulty, seen.hook()), receiptsTimeout)

	// The shards: payment i in shard i%shards, in order; the refund of the
	// shard's previous payment follows every third INSERT.
	paymentID := func(i int) string { return fmt.Sprintf("pay_rcpt_%s_%d", run, i) }
	streamARN := "arn:aws:dynamodb:eu-west-1:000000000000:table/Payments/stream/2026-01-01T00:00:00.000"
	stream := make([][]events.DynamoDBEventRecord, shards)
	add := func(shard int, name string, i int, status string) {
		seq := fmt.Sprintf("%03d%020d", shard+1, len(stream[shard]))
		img := map[string]events.DynamoDBAttributeValue{
			"paymentId":  events.NewStringAttribute(paymentID(i)),
			"customerId": events.NewStringAttribute(fmt.Sprintf("cus_rcpt_%s_%d", run, i)),
			"amount":     events.NewNumberAttribute(strconv.Itoa(100 + i)),
			"currency":   events.NewStringAttribute("EUR"),
			"status":     events.NewStringAttribute(status),
			"createdAt":  events.NewStringAttribute("2026-01-01T09:00:00Z"),
		}
		stream[shard] = append(stream[shard], events.DynamoDBEventRecord{
			EventID: fmt.Sprintf("ev-%s-%s", run, seq), EventName: name, EventSource: "aws:dynamodb", EventSourceArn: streamARN,
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES",
				Keys:     map[string]events.DynamoDBAttributeValue{"paymentId": events.NewStringAttribute(paymentID(i))},
				NewImage: img,
			},
		})
	}
	for i := range keys {
		add(i%shards, "INSERT", i, "captured")
		if i%3 == 0 && i >= shards {
			add(i%shards, "MODIFY", i-shards, "refunded")
		}
	}
	var consumers [][]events.DynamoDBEventRecord
	for _, recs := range stream {
		for range copies {
			consumers = append(consumers, recs)
		}
	}
	rand.Shuffle(len(consumers), func(i, j int) { consumers[i], consumers[j] = consumers[j], consumers[i] })

	var (
		lat         latencies
		results     tally
		mu          sync.Mutex
		deliveries  atomic.Int64
		redelivered atomic.Int64
		failures    []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// deliver hands a batch to the function, then what follows each
	// checkpoint the response names, until none is named; it reports
	// whether the batch got through.
	deliver := func(recs []events.DynamoDBEventRecord) bool {
		for attempt := 0; ; attempt++ {
			in, err := json.Marshal(events.DynamoDBEvent{Records: recs})
			if err != nil {
				fail("%v", err)
				return false
			}
			t0 := time.Now()
			out, err := invoke(context.Background(), in)
			lat.add(time.Since(t0))
			var resp events.DynamoDBEventResponse
			if err == nil {
				err = json.Unmarshal(out, &resp)
			}
			if err != nil {
				fail("invoke: %v", err)
				return false
			}
			if len(resp.BatchItemFailures) == 0 {
				results.add("batch done")
				return true
			}
			results.add("checkpoint")
			if len(resp.BatchItemFailures) != 1 {
				fail("one shard, one checkpoint: got %v", resp.BatchItemFailures)
				return false
			}
			i := slices.IndexFunc(recs, func(r events.DynamoDBEventRecord) bool {
				return r.Change.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier
			})
			if i < 0 || attempt >= maxRetries {
				fail("checkpoint %s after %d attempts", resp.BatchItemFailures[0].ItemIdentifier, attempt+1)
				return false
			}
			redelivered.Add(1)
			recs = recs[i:]
			time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond) // Lambda's retry
		}
	}
	// consume reads a shard in order, in batches of 1 to 20 records.
	consume := func(recs []events.DynamoDBEventRecord) {
		for len(recs) > 0 {
			n := min(len(recs), 1+rand.IntN(20))
			deliveries.Add(int64(n))
			if !deliver(recs[:n:n]) {
				return
			}
			recs = recs[n:]
		}
	}

	start := time.Now()
	queue := make(chan []events.DynamoDBEventRecord)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range queue {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				consume(c)
			}
		}()
	}
	for _, c := range consumers {
		queue <- c
	}
	close(queue)
	wg.Wait()
	wall := time.Since(start)

	require.Empty(t, failures)
	for i := range keys {
		require.Equal(t, 1, mailer.Sent(paymentID(i)), "receipts sent for payment %d", i)
	}
	assert.Len(t, mailer.Receipts(), keys, "one receipt per payment, no other")
	assert.Equal(t, wantRefused, refused.Load(), "refused sends")
	assert.Equal(t, wantLost, lost.Load(), "sends whose answer was lost")
	// A send whose answer was lost ran again under the same key, once: the
	// mail API's key kept it to one receipt. Every other redelivery found
	// the payment done (or its step recorded) and did not reach the mail API.
	assert.Equal(t, int(wantLost), mailer.Deduplicated(), "sends deduplicated by the mail API's key")
	report(t, "receipts", int(deliveries.Load()), &lat, wall,
		fmt.Sprintf("%s; mailer: %d refused, %d answers lost, %d sends deduplicated by key", results.String(), refused.Load(), lost.Load(), mailer.Deduplicated()),
		seen.counts(), redelivered.Load())
}
