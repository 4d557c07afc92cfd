package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDelayProxyDelaysEachRoundTrip(t *testing.T) {
	t.Parallel()
	// An echo server that answers each line in two writes, so a response
	// arrives in more than one chunk.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					half := len(line) / 2
					_, _ = io.WriteString(c, line[:half])
					time.Sleep(time.Millisecond)
					_, _ = io.WriteString(c, line[half:])
				}
			}()
		}
	}()

	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"no delay", 0}, {"20 ms", 20 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := startDelayProxy(ln.Addr().String(), tc.delay)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			c, err := net.Dial("tcp", p.Addr())
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			r := bufio.NewReader(c)
			for _, msg := range []string{"one\n", strings.Repeat("x", 100_000) + "\n", "three\n"} {
				t0 := time.Now()
				_, err := io.WriteString(c, msg)
				require.NoError(t, err)
				got, err := r.ReadString('\n')
				require.NoError(t, err)
				took := time.Since(t0)
				assert.Equal(t, msg, got, "bytes pass unchanged")
				assert.GreaterOrEqual(t, took, tc.delay+time.Millisecond, "the delay and the server's own time")
				// Not 2 × delay: the second chunk is held from its own arrival.
				assert.Less(t, took, 2*tc.delay+500*time.Millisecond)
			}
		})
	}
}

func TestDelayProxyClosesBothSides(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	p, err := startDelayProxy(ln.Addr().String(), time.Millisecond)
	require.NoError(t, err)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	server := <-accepted
	require.NoError(t, server.Close()) // the server hangs up: the client sees EOF
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, p.Close())
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	assert.Error(t, err, "closed: no longer listening")
}

func TestBatchEvents(t *testing.T) {
	t.Parallel()
	tm, err := loadBatchTemplates()
	require.NoError(t, err)

	decodePayment := func(t *testing.T, b []byte) streamPayment {
		var p streamPayment
		require.NoError(t, json.Unmarshal(b, &p))
		return p
	}
	for _, tc := range []struct {
		name string
		// ids are the batch's keys by default (what the front door keys
		// on), its payments in order, and its event's JSON.
		build func(n int) (ids, payments []string, shape string)
		n     int
	}{
		{"Kinesis", func(n int) ([]string, []string, string) {
			ev := tm.kinesisEvent(n, batchOrdered)
			var ids, pays []string
			for _, r := range ev.Records {
				assert.Equal(t, tm.kinesis.Kinesis.PartitionKey, r.Kinesis.PartitionKey, "one partition key")
				shard, seq, _ := strings.Cut(r.EventID, ":")
				assert.Equal(t, "shardId-000000000003", shard, "one shard")
				assert.Equal(t, r.Kinesis.SequenceNumber, seq)
				assert.Equal(t, tm.kinesis.EventSourceArn, r.EventSourceArn)
				ids = append(ids, r.EventID)
				pays = append(pays, decodePayment(t, r.Kinesis.Data).PaymentID)
			}
			for i := 1; i < len(ev.Records); i++ {
				a, b := ev.Records[i-1].Kinesis.SequenceNumber, ev.Records[i].Kinesis.SequenceNumber
				assert.True(t, len(a) == len(b) && a < b, "sequence numbers in order: %s, %s", a, b)
			}
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			return ids, pays, string(b)
		}, batchOrdered},
		{"DynamoDB Streams", func(n int) ([]string, []string, string) {
			ev := tm.ddbStreamsEvent(n, batchOrdered)
			var ids, pays []string
			for _, r := range ev.Records {
				assert.Equal(t, "INSERT", r.EventName)
				assert.Equal(t, r.Change.Keys["paymentId"].String(), r.Change.NewImage["paymentId"].String())
				assert.Equal(t, tm.ddb.Change.NewImage["customerId"].String(), r.Change.NewImage["customerId"].String())
				ids = append(ids, r.EventID)
				pays = append(pays, r.Change.NewImage["paymentId"].String())
			}
			assert.Equal(t, "pay_01JH8Z3Q4M5N6P7R8S9T0V1W2X", tm.ddb.Change.NewImage["paymentId"].String(), "the template is not changed")
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			return ids, pays, string(b)
		}, batchOrdered},
		{"Kafka", func(n int) ([]string, []string, string) {
			ev := tm.kafkaEvent(n, batchOrdered)
			require.Len(t, ev.Records, 1, "one partition")
			var ids, pays []string
			for i, r := range ev.Records[tm.kafkaPartition()] {
				assert.Equal(t, "payments", r.Topic)
				assert.EqualValues(t, 0, r.Partition)
				if i > 0 {
					assert.Equal(t, ev.Records[tm.kafkaPartition()][i-1].Offset+1, r.Offset, "offsets in order")
				}
				v, err := base64.StdEncoding.DecodeString(r.Value)
				require.NoError(t, err)
				ids = append(ids, fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset))
				pays = append(pays, decodePayment(t, v).PaymentID)
			}
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			return ids, pays, string(b)
		}, batchOrdered},
		{"SQS", func(n int) ([]string, []string, string) {
			ev := tm.sqsEvent(n, batchSQSMessages)
			var ids, orders []string
			for _, m := range ev.Records {
				var o batchOrder
				require.NoError(t, json.Unmarshal([]byte(m.Body), &o))
				assert.Equal(t, tm.order.SKU, o.SKU)
				assert.Len(t, m.Md5OfBody, 32)
				assert.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
				ids = append(ids, m.MessageId)
				orders = append(orders, o.OrderID)
			}
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			return ids, orders, string(b)
		}, batchSQSMessages},
		{"RabbitMQ", func(n int) ([]string, []string, string) {
			ev := tm.rabbitMQEvent(n, batchOrdered)
			require.Len(t, ev.MessagesByQueue, 1, "one queue")
			msgs := ev.MessagesByQueue["payments::/"]
			var ids, pays []string
			for _, m := range msgs {
				require.NotNil(t, m.BasicProperties.MessageID, "the default key is there")
				assert.Equal(t, tm.rmq.BasicProperties.AppID, m.BasicProperties.AppID)
				v, err := base64.StdEncoding.DecodeString(m.Data)
				require.NoError(t, err)
				ids = append(ids, *m.BasicProperties.MessageID)
				pays = append(pays, decodePayment(t, v).PaymentID)
			}
			assert.Equal(t, "msg-3001", *tm.rmq.BasicProperties.MessageID, "the template is not changed")
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			return ids, pays, string(b)
		}, batchOrdered},
		{"ActiveMQ", func(n int) ([]string, []string, string) {
			ev := tm.activeMQEvent(n, batchOrdered)
			var ids, pays []string
			for _, m := range ev.Messages {
				assert.Equal(t, "payments", m.Destination.PhysicalName, "one queue")
				v, err := base64.StdEncoding.DecodeString(m.Data)
				require.NoError(t, err)
				ids = append(ids, m.MessageID)
				pays = append(pays, decodePayment(t, v).PaymentID)
			}
			assert.Equal(t, tm.amqEv.EventSourceARN, ev.EventSourceARN)
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			return ids, pays, string(b)
		}, batchOrdered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids1, pays1, js := tc.build(1)
			ids2, pays2, _ := tc.build(2)
			require.Len(t, ids1, tc.n)
			seen := map[string]bool{}
			for _, id := range append(ids1, ids2...) {
				assert.False(t, seen[id], "key %s twice: two batches share no key", id)
				seen[id] = true
			}
			assert.NotEqual(t, pays1, pays2)
			for i, p := range pays1 {
				if tc.name == "SQS" {
					assert.Equal(t, batchOrderID(1, i), p)
				} else {
					assert.Equal(t, batchPaymentID(1, i), p, "the handler sees record %d's payment", i)
				}
			}
			idsAgain, _, jsAgain := tc.build(1)
			assert.Equal(t, ids1, idsAgain, "batch n is the same batch each time it is built")
			if tc.name != "SQS" && tc.name != "DynamoDB Streams" {
				assert.Equal(t, js, jsAgain)
			}
		})
	}
}

func TestBatchEventsDecodeAsLambdaDelivers(t *testing.T) {
	t.Parallel()
	tm, err := loadBatchTemplates()
	require.NoError(t, err)
	// What batch.mjs reads: the events as JSON, decoded back strictly.
	b, err := json.Marshal(ptBatchEvents{SQS: []events.SQSEvent{tm.sqsEvent(1, 2)}, Kinesis: []events.KinesisEvent{tm.kinesisEvent(2, 2)}})
	require.NoError(t, err)
	var back ptBatchEvents
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, tm.kinesisEvent(2, 2).Records[1].Kinesis.Data, back.Kinesis[0].Records[1].Kinesis.Data)
	assert.Equal(t, tm.sqsEvent(1, 2).Records[0].Body, back.SQS[0].Records[0].Body)
	assert.Contains(t, string(b), `"data":"`+base64.StdEncoding.EncodeToString(tm.paymentJSON(2, 0))+`"`, "Kinesis data in base64, as Lambda sends it")
}

// batchFixture is a result of every kind of row: idemkit's over one store
// (calls and times as given) and Powertools'.
func batchFixture(newCalls, replayCalls int, newTime time.Duration, problem string) *batchResult {
	row := func(impl, source, phase string, records int, ordered bool, calls int, took time.Duration) batchRow {
		return batchRow{Impl: impl, Store: storeDynamoDB, Source: source, Phase: phase, Records: records, Ordered: ordered,
			Times: []time.Duration{took, took, took}, Calls: []int{calls, calls, calls}}
	}
	b := &batchResult{Delay: batchDelay, Runs: map[string]int{storeDynamoDB: 3}, StoreErrs: map[string]string{},
		RoundTrips: map[string]time.Duration{storeDynamoDB: 5500 * time.Microsecond}, Waves: map[string]time.Duration{}, Counted: map[string]string{storeDynamoDB: "API calls"}}
	for _, source := range []string{sourceKinesis, sourceDDBStreams, sourceKafka, sourceRabbitMQ, sourceActiveMQ} {
		b.Rows = append(b.Rows,
			row(implIdemkit, source, phaseNew, batchOrdered, true, newCalls*batchOrdered, newTime),
			row(implIdemkit, source, phaseReplay, batchOrdered, true, replayCalls*batchOrdered, newTime/2))
	}
	b.Rows = append(b.Rows,
		row(implIdemkit, sourceSQS, phaseNew, batchSQSMessages, false, newCalls*batchSQSMessages, newTime/10),
		row(implIdemkit, sourceSQS, phaseReplay, batchSQSMessages, false, replayCalls*batchSQSMessages, newTime/20),
		row(implIdemkit, sourceKinesis, phaseFailure, batchOrdered, true, 100, newTime/2),
		row(implIdemkit, sourceKinesis, phaseRedelivery, 51, true, 102, newTime/2),
		row(implPowertools, sourceKinesis, phaseNew, batchOrdered, false, 200, 90*time.Millisecond),
		row(implPowertools, sourceKinesis, phaseReplay, batchOrdered, false, 100, 45*time.Millisecond),
		row(implPowertools, sourceSQS, phaseNew, batchSQSMessages, false, 20, 15*time.Millisecond),
		row(implPowertools, sourceSQS, phaseReplay, batchSQSMessages, false, 10, 8*time.Millisecond))
	b.Rows[0].Problem = problem
	return b
}

func TestBatchGate(t *testing.T) {
	t.Parallel()
	const slow, fast = 1100 * time.Millisecond, 60 * time.Millisecond
	for _, tc := range []struct {
		name string
		res  *batchResult
		// want are the failures' substrings, ungated and with the times
		// gated.
		ungated, gated []string
	}{
		{"today: calls met, times missed", batchFixture(2, 1, slow, ""), nil, []string{
			"100 records, new: 1100.0 ms per batch, 91 records/s, target ≤ 100.0 ms and ≥ 1000 records/s",
			"100 records, replay: 550.0 ms per batch, 182 records/s",
			"Kinesis, 100 records, new: 1100.0 ms, Powertools 90.0 ms", "Kinesis, 100 records, replay: 550.0 ms, Powertools 45.0 ms",
			"SQS, 10 records, new: 110.0 ms, Powertools 15.0 ms", "SQS, 10 records, replay: 55.0 ms, Powertools 8.0 ms"}},
		{"after the engine change: all met", batchFixture(2, 1, fast, ""), nil, nil},
		{"a store wave that costs 80 ms here: 4 of them bound the batch", withWave(batchFixture(2, 1, 300*time.Millisecond, ""), 80*time.Millisecond), nil, nil},
		{"past 4 store waves", withWave(batchFixture(2, 1, 400*time.Millisecond, ""), 80*time.Millisecond), nil, []string{
			"100 records, new: 400.0 ms per batch, 250 records/s, target ≤ 320.0 ms and ≥ 312 records/s"}},
		{"a store wave that fits 4 times in 100 ms keeps the 100 ms bound", withWave(batchFixture(2, 1, 180*time.Millisecond, ""), 20*time.Millisecond), nil, []string{
			"100 records, new: 180.0 ms per batch, 556 records/s, target ≤ 100.0 ms and ≥ 1000 records/s"}},
		{"fewer round trips per record still meet the calls target", batchFixture(1, 0, fast, ""), nil, nil},
		{"a third call per new record", batchFixture(3, 1, fast, ""), []string{"new: store calls per record 3.00, target ≤ 2"}, nil},
		{"a second call per replay", batchFixture(2, 2, fast, ""), []string{"replay: store calls per record 2.00, target ≤ 1"}, nil},
		{"a wrong batch", batchFixture(2, 1, fast, "run 1: the handler ran 99 times, want 100"),
			[]string{"Kinesis, 100 records, new: run 1: the handler ran 99 times, want 100"},
			[]string{"Kinesis, 100 records, new: 60.0 ms, Powertools 90.0 ms"}},
		{"a store not measured", func() *batchResult {
			b := batchFixture(2, 1, fast, "")
			b.StoreErrs[storeRedis] = "REDIS_URL is not set"
			return b
		}(), []string{"§12 batches over Redis (not measured: REDIS_URL is not set)"}, nil},
		{"Powertools not measured", func() *batchResult {
			b := batchFixture(2, 1, fast, "")
			b.PowertoolsErr = "node: not found"
			b.Rows = b.Rows[:len(b.Rows)-4]
			return b
		}(), nil, []string{"§12 Powertools (not measured: node: not found)"}},
		{"a Powertools batch missing", func() *batchResult {
			b := batchFixture(2, 1, fast, "")
			b.Rows = b.Rows[:len(b.Rows)-1]
			return b
		}(), nil, []string{"§12 SQS replay, DynamoDB: not measured beside Powertools"}},
		{"nothing measured (section not run)", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ungated := tc.res.gate(false)
			assertFailures(t, tc.ungated, ungated)
			gated := tc.res.gate(true)
			assertFailures(t, append(tc.ungated, tc.gated...), gated)
		})
	}
}

// withWave sets b's DynamoDB store wave, and Powertools' times far above
// idemkit's, so that only the time bound decides.
func withWave(b *batchResult, wave time.Duration) *batchResult {
	b.Waves[storeDynamoDB] = wave
	for i := range b.Rows {
		if b.Rows[i].Impl == implPowertools {
			b.Rows[i].Times = []time.Duration{time.Second}
		}
	}
	return b
}

// assertFailures checks that every failure matches one of want's substrings
// and every substring one failure.
func assertFailures(t *testing.T, want, got []string) {
	t.Helper()
	if len(want) == 0 {
		assert.Empty(t, got)
		return
	}
	for _, w := range want {
		assert.True(t, containsAny(got, w), "want a failure with %q in %q", w, got)
	}
	for _, g := range got {
		matched := false
		for _, w := range want {
			matched = matched || strings.Contains(g, w)
		}
		assert.True(t, matched, "unexpected failure %q", g)
	}
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestBatchGateIsAConst(t *testing.T) {
	t.Parallel()
	// The batch engine claims in waves (issue 36): its time targets gate
	// the command, so a batch as slow as a claim and a completion per
	// record in turn fails it.
	assert.True(t, batchTimesGated)
	slow := batchFixture(2, 1, 1100*time.Millisecond, "")
	assert.NotEmpty(t, slow.gate(batchTimesGated))
}

func TestBatchReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		gated       bool
		res         *batchResult
		contains    []string
		notContains []string
	}{
		{"today, not gated", false, batchFixture(2, 1, 1100*time.Millisecond, ""),
			[]string{"**not gated yet**", "then 3 runs of each batch over DynamoDB, the sources in turn", "target (issue 36, not gated yet): **missed**", "| DynamoDB | Kinesis | new | 100 | 1100.0 ms ± 0% | 91 | 200 (all 3 runs) | 2.00 | ≤ 2: met |",
				"| Kinesis | new | 100 | 1100.0 ms ± 0% | 90.0 ms ± 0% | 12.22 | 2.00 vs 2.00 | target (issue 36, not gated yet): **missed** |",
				"| DynamoDB | API calls | 5.5 ms | 1100.0 ms | – | 100.0 ms (store wave not measured) | 1000 |", "| RabbitMQ, new | 1100.0 ms |", "| Kinesis, failure at record 50 | 550.0 ms |", "| Kinesis, redelivery from record 50 | 550.0 ms |", "| SQS, new | 110.0 ms |"},
			nil},
		{"after the engine change, gated", true, batchFixture(2, 1, 60*time.Millisecond, ""),
			[]string{"| DynamoDB | Kafka | replay | 100 | 30.0 ms ± 0% | 3333 | 100 (all 3 runs) | 1.00 | ≤ 1: met | met | met |"},
			[]string{"not gated yet"}},
		{"DynamoDB Local's store wave, gated", true, withWave(batchFixture(2, 1, 300*time.Millisecond, ""), 80*time.Millisecond),
			[]string{"| DynamoDB | API calls | 5.5 ms | 1100.0 ms | 80.0 ms | 320.0 ms (4 store waves: one of 100 calls took 80.0 ms here) | 312 |",
				"| DynamoDB | ActiveMQ | new | 100 | 300.0 ms ± 0% | 333 | 200 (all 3 runs) | 2.00 | ≤ 2: met | met | met |"},
			nil},
		{"Powertools not measured", false, func() *batchResult {
			b := batchFixture(2, 1, 60*time.Millisecond, "")
			b.PowertoolsErr = "node: not found"
			return b
		}(), []string{"Not measured: `node: not found`"}, []string{"| idemkit / Powertools |"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.res.write(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, tc.gated)
			for _, s := range tc.contains {
				assert.Contains(t, b.String(), s)
			}
			for _, s := range tc.notContains {
				assert.NotContains(t, b.String(), s)
			}
			targets := tc.res.targets(tc.gated)
			require.NotEmpty(t, targets)
			assert.Equal(t, "12", targets[0].section)
			assert.True(t, targets[0].met, "calls per record: %+v", targets[0])
			if !tc.gated {
				assert.Contains(t, targets[1].want, "(issue 36, not gated yet)")
			}
		})
	}
}

func TestTimeBatchChecks(t *testing.T) {
	t.Parallel()
	var n int64
	st := &batchStore{calls: func() int64 { return n }}
	h := &batchHandler{fail: map[string]bool{}}
	h.failOnce("b")
	take := timeBatch(context.Background(), st, h, func(ctx context.Context) []string {
		_, ok := ctx.Deadline()
		assert.True(t, ok, "a Lambda-like deadline")
		n += 3
		assert.NoError(t, h.handle("a"))
		assert.ErrorIs(t, h.handle("b"), errBatchHandler)
		assert.NoError(t, h.handle("b"), "fails once")
		return []string{"seq-b"}
	})
	assert.Equal(t, 3, take.calls)
	assert.Equal(t, 3, take.handled)
	for _, tc := range []struct {
		name     string
		handled  int
		failures []string
		want     string
	}{
		{"as expected", 3, []string{"seq-b"}, ""},
		{"handler runs", 2, []string{"seq-b"}, "run 1: the handler ran 3 times, want 2"},
		{"response", 3, nil, "run 1: the response names [seq-b], want []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, take.check(0, tc.handled, tc.failures))
		})
	}
}

func TestParsePowertoolsBatch(t *testing.T) {
	t.Parallel()
	out := `{"source":"sqs","phase":"new","run":0,"records":10,"ms":12.5,"calls":20,"handled":10,"failures":0}
{"source":"sqs","phase":"replay","run":0,"records":10,"ms":6.5,"calls":10,"handled":0,"failures":0}
{"source":"kinesis","phase":"new","run":0,"records":100,"ms":80,"calls":200,"handled":100,"failures":1}
`
	rows, err := parsePowertoolsBatch([]byte(out))
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, batchRow{Impl: implPowertools, Store: storeDynamoDB, Source: sourceSQS, Phase: phaseNew, Records: 10,
		Times: []time.Duration{12500 * time.Microsecond}, Calls: []int{20}}, rows[0])
	assert.Equal(t, "run 1: the response names [a record], want []", rows[2].Problem)

	for _, bad := range []string{"", "not json\n", `{"source":"kafka","phase":"new","records":1}` + "\n"} {
		_, err := parsePowertoolsBatch([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}
