package otelidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/kafkabatch"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/otelidem"
)

// A producer's trace context, as a caller or a message carries it.
const (
	producerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerParent = "00f067aa0ba902b7"
	producerHeader = "00-" + producerTrace + "-" + producerParent + "-01"
	secretKey      = "client-key-7f3a" // must never reach a span
)

type charge struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// noRawInput fails t when a span's attribute holds the raw key.
func noRawInput(t *testing.T, p *process) {
	t.Helper()
	for _, s := range p.spans.GetSpans() {
		for _, kv := range s.Attributes {
			assert.NotContains(t, kv.Value.String(), secretKey, "attribute %s of span %s", kv.Key, s.Name)
		}
	}
}

func TestWrapNewKeyThenReplayLinkedAfterRestart(t *testing.T) {
	client, tbl := table(t)
	ctx := context.Background()
	key := func(c charge) (string, error) { return secretKey + c.ID, nil }

	first := newProcess(t, client, tbl)
	runs := 0
	charge1 := idempotent.Wrap(first.engine, func(ctx context.Context, c charge) (string, error) {
		runs++
		assert.True(t, trace.SpanContextFromContext(ctx).IsValid(), "the work runs inside the call's span")
		return "charged " + c.ID, nil
	}, idempotent.WithKey(key))
	out, err := charge1(ctx, charge{ID: "c-1", Cents: 100})
	require.NoError(t, err)
	assert.Equal(t, "charged c-1", out)
	orig := first.only(t)
	assert.Equal(t, "executed", attr(orig, otelidem.AttrOutcome).AsString())
	assert.Equal(t, int64(2), attr(orig, otelidem.AttrStoreCalls).AsInt64(), "claim and completion")
	assert.True(t, attr(orig, otelidem.AttrHandlerRan).AsBool())
	assert.True(t, strings.HasPrefix(attr(orig, otelidem.AttrRecordID).AsString(), "otel-test#"))
	assert.Equal(t, "*dynamostore.Store", attr(orig, otelidem.AttrStore).AsString())
	assert.Equal(t, []string{"claim", "run", "commit"}, eventNames(orig))
	assert.Equal(t, codes.Unset, orig.Status.Code)
	assert.Equal(t, map[string]int64{"executed": 1}, first.outcomes(t))
	assert.Equal(t, uint64(1), first.addedLatencyCount(t))

	// A restart: a new process, a new store client's view, a new
	// TracerProvider; only the record connects the two.
	second := newProcess(t, client, tbl)
	charge2 := idempotent.Wrap(second.engine, func(ctx context.Context, c charge) (string, error) {
		runs++
		return "charged again", nil
	}, idempotent.WithKey(key))
	out, err = charge2(ctx, charge{ID: "c-1", Cents: 100})
	require.NoError(t, err)
	assert.Equal(t, "charged c-1", out)
	assert.Equal(t, 1, runs)
	replay := second.only(t)
	assert.Equal(t, "replayed", attr(replay, otelidem.AttrOutcome).AsString())
	assert.Equal(t, int64(1), attr(replay, otelidem.AttrStoreCalls).AsInt64(), "the refused claim returns the record")
	assert.NotEqual(t, orig.SpanContext.TraceID(), replay.SpanContext.TraceID(), "a trace of its own")
	require.Len(t, replay.Links, 1)
	assert.Equal(t, orig.SpanContext.TraceID(), replay.Links[0].SpanContext.TraceID())
	assert.Equal(t, orig.SpanContext.SpanID(), replay.Links[0].SpanContext.SpanID())
	assert.Equal(t, "completed_by", replay.Links[0].Attributes[0].Value.AsString())
	assert.Equal(t, map[string]int64{"replayed": 1}, second.outcomes(t))
	noRawInput(t, first)
	noRawInput(t, second)
	t.Logf("the original:\n%s", describe(orig))
	t.Logf("its replay, after a restart:\n%s", describe(replay))
}

func TestDoTakeoverOfACrashedOwner(t *testing.T) {
	client, tbl := table(t)
	ctx := context.Background()
	p := newProcess(t, client, tbl)
	// A crashed owner's record: in progress, its lease lapsed a second ago.
	now := time.Now()
	store := dynamostore.New(client, tbl)
	_, err := store.Claim(ctx, storage.Record{
		ID: idempotent.RecordID("otel-test", "", secretKey), Status: storage.StatusInProgress,
		ExpiresAt: now.Add(time.Hour), LeaseExpiresAt: now.Add(-time.Second), Lease: "crashed-owner", Version: storage.RecordVersion,
	}, now.Add(-2*time.Second))
	require.NoError(t, err)

	res, err := p.engine.Do(ctx, idempotent.Call{Key: secretKey}, func(context.Context) ([]byte, error) { return []byte(`"done"`), nil })
	require.NoError(t, err)
	assert.True(t, res.Ran)
	s := p.only(t)
	assert.Equal(t, "executed", attr(s, otelidem.AttrOutcome).AsString())
	assert.True(t, attr(s, otelidem.AttrTookOver).AsBool())
	require.NotEmpty(t, s.Events)
	assert.Equal(t, "claim", s.Events[0].Name)
	assert.Contains(t, s.Events[0].Attributes, otelidem.AttrTookOver.Bool(true))
	noRawInput(t, p)
}

func TestDoResumeAfterSteps(t *testing.T) {
	client, tbl := table(t)
	ctx := context.Background()
	p := newProcess(t, client, tbl)
	charged := 0
	work := func(fail bool) func(context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			if _, err := idempotent.Step(ctx, "charge", func(context.Context) (int, error) { charged++; return 42, nil }); err != nil {
				return nil, err
			}
			if fail {
				return nil, errors.New("ledger unavailable")
			}
			return []byte(`"ok"`), nil
		}
	}
	_, err := p.engine.Do(ctx, idempotent.Call{Key: secretKey}, work(true))
	require.EqualError(t, err, "ledger unavailable")
	_, err = p.engine.Do(ctx, idempotent.Call{Key: secretKey}, work(false))
	require.NoError(t, err)
	assert.Equal(t, 1, charged)

	calls := p.calls(t)
	require.Len(t, calls, 2)
	failed, resumed := calls[0], calls[1]
	assert.Equal(t, "handler_error", attr(failed, otelidem.AttrOutcome).AsString())
	assert.Equal(t, codes.Error, failed.Status.Code)
	assert.Equal(t, []string{"claim", "step", "run", "give_back"}, eventNames(failed))
	assert.Equal(t, int64(3), attr(failed, otelidem.AttrStoreCalls).AsInt64(), "claim, step, suspend")

	assert.Equal(t, "executed", attr(resumed, otelidem.AttrOutcome).AsString())
	assert.True(t, attr(resumed, otelidem.AttrResumed).AsBool())
	assert.Equal(t, int64(1), attr(resumed, otelidem.AttrResumedSteps).AsInt64())
	assert.Equal(t, []string{"claim", "step", "run", "commit"}, eventNames(resumed))
	assert.Contains(t, resumed.Events[1].Attributes, otelidem.AttrReplayed.Bool(true))
	assert.Contains(t, resumed.Events[1].Attributes, otelidem.AttrStep.String("charge"))
	assert.Equal(t, int64(2), attr(resumed, otelidem.AttrStoreCalls).AsInt64(), "a replayed step costs no store call")
	assert.Equal(t, map[string]int64{"handler_error": 1, "executed": 1}, p.outcomes(t))
}

func TestNetHTTPContinuesTheCallersTrace(t *testing.T) {
	client, tbl := table(t)
	p := newProcess(t, client, tbl)
	h := nethttp.Middleware(p.engine)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"paid":true}`)
	}))

	for n, tc := range []struct {
		name   string
		server http.Handler
		parent func(t *testing.T, s, request spanRef)
	}{
		{"the caller's traceparent, without otelhttp", otelidem.Extract(h), func(t *testing.T, s, _ spanRef) {
			assert.Equal(t, producerTrace, s.parentTrace)
			assert.Equal(t, producerParent, s.parentSpan)
		}},
		{"the request's span, as otelhttp starts it", serverSpan(p, h), func(t *testing.T, s, request spanRef) {
			assert.Equal(t, request.trace, s.parentTrace)
			assert.Equal(t, request.span, s.parentSpan)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.spans.Reset()
			srv := httptest.NewServer(tc.server)
			defer srv.Close()
			key := fmt.Sprintf("%s-%d", secretKey, n)
			for i := range 2 {
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/pay", strings.NewReader(`{"cents":5}`))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", key)
				req.Header.Set("Traceparent", producerHeader)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				_ = resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, i == 1, resp.Header.Get("Idempotent-Replayed") == "true")
			}
			calls := p.calls(t)
			require.Len(t, calls, 2)
			var request spanRef
			for _, s := range p.spans.GetSpans() {
				if s.Name == "POST /pay" {
					request = ref(s) // the first request's
					break
				}
			}
			tc.parent(t, ref(calls[0]), request)
			assert.Equal(t, "executed", attr(calls[0], otelidem.AttrOutcome).AsString())
			assert.Equal(t, "replayed", attr(calls[1], otelidem.AttrOutcome).AsString())
			require.Len(t, calls[1].Links, 1)
			assert.Equal(t, calls[0].SpanContext.SpanID(), calls[1].Links[0].SpanContext.SpanID())
			noRawInput(t, p)
		})
	}
}

// serverSpan stands in for otelhttp.NewHandler: a server span per request.
func serverSpan(p *process, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := p.tp.Tracer("server").Start(r.Context(), r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

type spanRef struct{ trace, span, parentTrace, parentSpan string }

func ref(s tracetest.SpanStub) spanRef {
	return spanRef{trace: s.SpanContext.TraceID().String(), span: s.SpanContext.SpanID().String(),
		parentTrace: s.Parent.TraceID().String(), parentSpan: s.Parent.SpanID().String()}
}

func TestAPIGatewayV2ContinuesTheCallersTrace(t *testing.T) {
	client, tbl := table(t)
	p := newProcess(t, client, tbl)
	handle := apigateway.HandlerV2(nethttp.Middleware(p.engine)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"paid":true}`)
	})))
	ev := events.APIGatewayV2HTTPRequest{
		RawPath: "/pay", Body: `{"cents":5}`,
		Headers: map[string]string{"idempotency-key": secretKey, "traceparent": producerHeader, "content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/pay"},
		},
	}
	for range 2 {
		resp, err := handle(context.Background(), ev)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	}
	calls := p.calls(t)
	require.Len(t, calls, 2)
	for _, s := range calls {
		assert.Equal(t, producerTrace, s.Parent.TraceID().String())
		assert.Equal(t, producerParent, s.Parent.SpanID().String())
		assert.Equal(t, trace.SpanKindConsumer, s.SpanKind)
	}
	assert.Equal(t, "replayed", attr(calls[1], otelidem.AttrOutcome).AsString())
	require.Len(t, calls[1].Links, 1)
	assert.Equal(t, calls[0].SpanContext.SpanID(), calls[1].Links[0].SpanContext.SpanID())
	noRawInput(t, p)
}

func TestSQSBatchWithAFailure(t *testing.T) {
	client, tbl := table(t)
	p := newProcess(t, client, tbl)
	handle := sqsbatch.WrapMessage(p.engine, func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "poison" {
			return errors.New("cannot parse the order")
		}
		return nil
	})
	traceparent := producerHeader
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-xray", Body: "order 1", Attributes: map[string]string{
			"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}},
		{MessageId: "m-w3c", Body: "order 2", MessageAttributes: map[string]events.SQSMessageAttribute{
			"traceparent": {DataType: "String", StringValue: &traceparent}}},
		{MessageId: "m-poison", Body: "poison"},
	}}
	resp, err := handle(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: "m-poison"}}, resp.BatchItemFailures)

	byMessage := map[string]int{}
	calls := p.calls(t)
	require.Len(t, calls, 3)
	for i, s := range calls {
		byMessage[attr(s, "idemkit.message_id").AsString()] = i
	}
	xray := calls[byMessage["m-xray"]]
	assert.Equal(t, "5759e988bd862e3fe1be46a994272793", xray.Parent.TraceID().String())
	assert.Equal(t, "53995c3f42cd8ad8", xray.Parent.SpanID().String())
	assert.Equal(t, trace.SpanKindConsumer, xray.SpanKind)
	w3c := calls[byMessage["m-w3c"]]
	assert.Equal(t, producerTrace, w3c.Parent.TraceID().String())
	poison := calls[byMessage["m-poison"]]
	assert.False(t, poison.Parent.IsValid(), "no producer context: a root span")
	assert.Equal(t, "handler_error", attr(poison, otelidem.AttrOutcome).AsString())
	assert.Equal(t, codes.Error, poison.Status.Code)
	for _, id := range []string{"m-xray", "m-w3c"} {
		assert.Equal(t, "executed", attr(calls[byMessage[id]], otelidem.AttrOutcome).AsString(), id)
	}
	assert.Equal(t, map[string]int64{"executed": 2, "handler_error": 1}, p.outcomes(t))

	// Redelivered, the done ones replay, linked to their runs.
	p.spans.Reset()
	resp, err = handle(context.Background(), events.SQSEvent{Records: batch.Records[:2]})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	for _, s := range p.calls(t) {
		assert.Equal(t, "replayed", attr(s, otelidem.AttrOutcome).AsString())
		assert.Len(t, s.Links, 1)
	}
}

func TestKafkaBatchContinuesTheProducersTrace(t *testing.T) {
	client, tbl := table(t)
	p := newProcess(t, client, tbl)
	handle := kafkabatch.WrapRecord(p.engine, func(context.Context, events.KafkaRecord) error { return nil },
		kafkabatch.WithRecordKey(func(r events.KafkaRecord) (string, error) { return secretKey + r.Key, nil }))
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{"orders-0": {{
		Topic: "orders", Partition: 0, Offset: 7, Key: "b3JkZXI=", Value: "e30=",
		Headers: []map[string]events.JSONNumberBytes{{"traceparent": events.JSONNumberBytes(producerHeader)}},
	}}}}
	_, err := handle(context.Background(), ev)
	require.NoError(t, err)
	s := p.only(t)
	assert.Equal(t, producerTrace, s.Parent.TraceID().String())
	assert.Equal(t, "executed", attr(s, otelidem.AttrOutcome).AsString())
	noRawInput(t, p)
}
