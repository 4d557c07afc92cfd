package otelidem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idempotent"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/idemkit/idemkit/otelidem"

// SpanName is the name of every call's span.
const SpanName = "idemkit.call"

// The attributes of a call's span (and, for outcome, of its metrics).
const (
	AttrOutcome      = attribute.Key("idemkit.outcome")       // idempotent.Outcome's name: executed, replayed, ...
	AttrRecordID     = attribute.Key("idemkit.record_id")     // the hashed record id (never the raw key)
	AttrPrefix       = attribute.Key("idemkit.prefix")        // the Engine's key prefix
	AttrStore        = attribute.Key("idemkit.store")         // the store's Go type
	AttrStoreCalls   = attribute.Key("idemkit.store_calls")   // store calls the engine reported (see the package doc)
	AttrHandlerRan   = attribute.Key("idemkit.handler_ran")   // the work ran in this call
	AttrTookOver     = attribute.Key("idemkit.took_over")     // took over a crashed or overrunning owner
	AttrResumed      = attribute.Key("idemkit.resumed")       // resumed a suspended record
	AttrResumedSteps = attribute.Key("idemkit.resumed_steps") // finished steps the claim resumed with
	AttrFromCache    = attribute.Key("idemkit.from_cache")    // a replay from the local cache
	AttrShared       = attribute.Key("idemkit.shared")        // a replay shared from another call in this process
	AttrStep         = attribute.Key("idemkit.step")          // a step event's step name
	AttrClaimed      = attribute.Key("idemkit.claimed")       // a claim event: the call owns the record
	AttrReplayed     = attribute.Key("idemkit.replayed")      // a step event: answered from the record
	AttrWait         = attribute.Key("idemkit.wait")          // a wait event: seconds until the next poll
	AttrLink         = attribute.Key("idemkit.link")          // a link's role: "completed_by" or "producer"
)

// The metrics' names.
const (
	MetricCalls        = "idemkit.calls"         // counter of calls, by idemkit.outcome
	MetricAddedLatency = "idemkit.added_latency" // histogram, seconds: a call's time minus its work's
)

// Option configures Instrument.
type Option func(*config)

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	propagator propagation.TextMapPropagator
}

// WithTracerProvider sets the TracerProvider (default otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the MeterProvider (default otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithPropagator sets the propagator that reads a producer's context from
// a message's attributes or headers and an HTTP request's headers (default
// otel.GetTextMapPropagator(), or W3C Trace Context when that propagates
// nothing). The record always keeps a W3C traceparent.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// instrumentation is what Instrument builds: one per Engine option.
type instrumentation struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	calls      metric.Int64Counter
	added      metric.Float64Histogram
}

// Instrument returns the idempotent.Option that traces every call of an
// Engine (a span per call, with its facts, events and links) and counts
// them (the metrics above), through the OpenTelemetry API alone:
//
//	engine := idempotent.New(store, otelidem.Instrument(otelidem.WithTracerProvider(tp)))
//
// It adds one idempotent.WithCallHook; it composes with the Engine's other
// hooks (EMF metrics, say). Instrument panics only if the MeterProvider
// refuses the instruments' fixed names and units, a programmer error.
func Instrument(opts ...Option) idempotent.Option {
	c := config{}
	for _, opt := range opts {
		opt(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.propagator == nil {
		c.propagator = defaultPropagator()
	}
	meter := c.mp.Meter(ScopeName)
	calls, err := meter.Int64Counter(MetricCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Idempotent calls, by outcome."))
	if err != nil {
		panic("otelidem: " + err.Error())
	}
	added, err := meter.Float64Histogram(MetricAddedLatency, metric.WithUnit("s"),
		metric.WithDescription("The time idemkit adds to a call: the call's duration less its work's."))
	if err != nil {
		panic("otelidem: " + err.Error())
	}
	in := &instrumentation{tracer: c.tp.Tracer(ScopeName), propagator: c.propagator, calls: calls, added: added}
	return idempotent.WithCallHook(in.start)
}

// start is the call hook: it starts the call's span as the child of the
// span in ctx (otelhttp's, the Lambda invocation's), or of the producer's
// context a batch record or an HTTP request carries; it links to the
// producer when both are there.
func (in *instrumentation) start(ctx context.Context, info idempotent.CallInfo) (context.Context, idempotent.CallTrace) {
	kind := trace.SpanKindInternal
	var links []trace.Link
	if producer, ok := in.carried(ctx); ok {
		if trace.SpanContextFromContext(ctx).IsValid() {
			links = append(links, trace.Link{SpanContext: producer, Attributes: []attribute.KeyValue{AttrLink.String("producer")}})
		} else {
			ctx = trace.ContextWithRemoteSpanContext(ctx, producer)
			kind = trace.SpanKindConsumer
		}
	}
	attrs := make([]attribute.KeyValue, 0, 2+len(info.Attrs))
	attrs = append(attrs, AttrPrefix.String(info.Prefix), AttrStore.String(info.Store))
	for _, a := range info.Attrs {
		attrs = append(attrs, attribute.String("idemkit."+a.Key, a.Value.String()))
	}
	ctx, span := in.tracer.Start(ctx, SpanName, trace.WithSpanKind(kind), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	c := &call{in: in, span: span, start: time.Now()}
	return ctx, idempotent.CallTrace{Trace: traceparent(span.SpanContext()), Progress: c.progress, End: c.end}
}

// call is one traced call.
type call struct {
	in         *instrumentation
	span       trace.Span
	start      time.Time
	storeCalls atomic.Int64

	mu                sync.Mutex
	runStart, runEnd  time.Time // the work's run, by this package's clock
	resumedSteps      int
	tookOver, resumed bool
}

// progress turns a stage of the call into a span event.
func (c *call) progress(p idempotent.Progress) {
	if p.StoreCall() {
		c.storeCalls.Add(1)
	}
	var attrs []attribute.KeyValue
	switch p.Stage {
	case idempotent.StageClaim:
		attrs = []attribute.KeyValue{AttrClaimed.Bool(p.Claimed)}
		if p.TookOver {
			attrs = append(attrs, AttrTookOver.Bool(true))
		}
		if p.Resumed {
			attrs = append(attrs, AttrResumed.Bool(true), AttrResumedSteps.Int(p.Steps))
		}
		if p.Claimed && p.Err == nil {
			c.mu.Lock()
			c.runStart, c.resumedSteps, c.tookOver, c.resumed = time.Now(), p.Steps, p.TookOver, p.Resumed
			c.mu.Unlock()
		}
	case idempotent.StageWait:
		attrs = []attribute.KeyValue{AttrWait.Float64(p.Wait.Seconds())}
	case idempotent.StageStep:
		attrs = []attribute.KeyValue{AttrStep.String(p.Step), AttrReplayed.Bool(p.Replayed)}
	case idempotent.StageRun:
		c.mu.Lock()
		c.runEnd = time.Now()
		c.mu.Unlock()
	}
	if p.Err != nil {
		attrs = append(attrs, attribute.String("error.message", p.Err.Error()))
	}
	c.span.AddEvent(p.Stage.String(), trace.WithAttributes(attrs...))
}

// end sets the call's facts on its span, links a replay to the call that
// stored its response, ends the span and records the metrics.
func (c *call) end(ev idempotent.Event) {
	end := time.Now()
	c.mu.Lock()
	work := time.Duration(0)
	if !c.runStart.IsZero() && !c.runEnd.IsZero() {
		work = c.runEnd.Sub(c.runStart)
	}
	resumedSteps := c.resumedSteps
	c.mu.Unlock()

	outcome := AttrOutcome.String(ev.Outcome.String())
	attrs := []attribute.KeyValue{
		outcome,
		AttrStoreCalls.Int64(c.storeCalls.Load()),
		AttrHandlerRan.Bool(ev.HandlerRan),
	}
	if ev.RecordID != "" {
		attrs = append(attrs, AttrRecordID.String(ev.RecordID))
	}
	if ev.TookOver {
		attrs = append(attrs, AttrTookOver.Bool(true))
	}
	if ev.Resumed {
		attrs = append(attrs, AttrResumed.Bool(true), AttrResumedSteps.Int(resumedSteps))
	}
	if ev.FromCache {
		attrs = append(attrs, AttrFromCache.Bool(true))
	}
	if ev.Shared {
		attrs = append(attrs, AttrShared.Bool(true))
	}
	c.span.SetAttributes(attrs...)
	if sc, ok := parseTraceparent(ev.Trace); ok {
		c.span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLink.String("completed_by")}})
	}
	if failed(ev.Outcome) {
		desc := ev.Outcome.String()
		if ev.Err != nil {
			desc = ev.Err.Error()
		}
		c.span.SetStatus(codes.Error, desc)
	}
	c.span.End(trace.WithTimestamp(end))

	ctx := context.Background()
	set := metric.WithAttributeSet(attribute.NewSet(outcome))
	c.in.calls.Add(ctx, 1, set)
	c.in.added.Record(ctx, max(end.Sub(c.start)-work, 0).Seconds(), set)
}

// failed reports the outcomes whose span's status is Error: the engine or
// the work failed. A duplicate refused by the rules (in progress, payload
// mismatch, a response not stored, a rejected key) is the rules working.
func failed(o idempotent.Outcome) bool {
	switch o {
	case idempotent.OutcomeHandlerError, idempotent.OutcomeStoreError, idempotent.OutcomeLeaseLost, idempotent.OutcomeNotStored:
		return true
	}
	return false
}

// defaultPropagator is otel.GetTextMapPropagator(), or W3C Trace Context
// when the global one propagates nothing (none was set).
func defaultPropagator() propagation.TextMapPropagator {
	if p := otel.GetTextMapPropagator(); len(p.Fields()) > 0 {
		return p
	}
	return propagation.TraceContext{}
}
