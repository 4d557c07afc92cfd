package otelidem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	"github.com/idemkit/idemkit/otelidem"
)

// table creates a fresh idempotency table on DynamoDB Local (skipping the
// test without one, failing it under IDEMKIT_REQUIRE_DYNAMODB=1) and
// returns its client and name.
func table(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	client := localddbtest.Client(t)
	spec := localddb.Table{Name: localddb.UniqueTables(t.Name()).Idempotency, PartitionKey: "id", TTLAttribute: "expiration"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, localddb.DeleteTable(ctx, client, spec.Name))
	})
	require.NoError(t, localddb.CreateTable(ctx, client, spec))
	return client, spec.Name
}

// process is one process's view: an Engine over the table, traced into its
// own in-memory exporter and metric reader, as after a restart.
type process struct {
	spans   *tracetest.InMemoryExporter
	tp      *sdktrace.TracerProvider
	metrics *sdkmetric.ManualReader
	engine  *idempotent.Engine
}

func newProcess(t *testing.T, client *dynamodb.Client, tableName string, opts ...idempotent.Option) *process {
	t.Helper()
	p := &process{spans: tracetest.NewInMemoryExporter(), metrics: sdkmetric.NewManualReader()}
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(p.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.metrics))
	t.Cleanup(func() {
		_ = p.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	store := dynamostore.New(client, tableName)
	opts = append([]idempotent.Option{
		idempotent.WithPrefix("otel-test"),
		idempotent.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		otelidem.Instrument(otelidem.WithTracerProvider(p.tp), otelidem.WithMeterProvider(mp)),
	}, opts...)
	p.engine = idempotent.New(store, opts...)
	return p
}

// calls returns the spans the process ended, named otelidem.SpanName.
func (p *process) calls(t *testing.T) []tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range p.spans.GetSpans() {
		if s.Name == otelidem.SpanName {
			out = append(out, s)
		}
	}
	return out
}

// only returns the one call span the process ended.
func (p *process) only(t *testing.T) tracetest.SpanStub {
	t.Helper()
	calls := p.calls(t)
	require.Len(t, calls, 1, "call spans")
	return calls[0]
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func eventNames(s tracetest.SpanStub) []string {
	names := make([]string, 0, len(s.Events))
	for _, ev := range s.Events {
		names = append(names, ev.Name)
	}
	return names
}

// outcomes reads the process's idemkit.calls counter by outcome.
func (p *process) outcomes(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, p.metrics.Collect(context.Background(), &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelidem.MetricCalls {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value(otelidem.AttrOutcome)
				got[v.AsString()] += dp.Value
			}
		}
	}
	return got
}

// addedLatencyCount is the number of idemkit.added_latency observations.
func (p *process) addedLatencyCount(t *testing.T) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, p.metrics.Collect(context.Background(), &rm))
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == otelidem.MetricAddedLatency {
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					n += dp.Count
				}
			}
		}
	}
	return n
}

// describe renders a span as the report shows it.
func describe(s tracetest.SpanStub) string {
	var b strings.Builder
	fmt.Fprintf(&b, "span %q trace=%s span=%s parent=%s kind=%s status=%s\n", s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(),
		s.Parent.SpanID(), s.SpanKind, s.Status.Code)
	attrs := make([]string, 0, len(s.Attributes))
	for _, kv := range s.Attributes {
		attrs = append(attrs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
	}
	sort.Strings(attrs)
	fmt.Fprintf(&b, "  attributes: %s\n", strings.Join(attrs, " "))
	for _, ev := range s.Events {
		evAttrs := make([]string, 0, len(ev.Attributes))
		for _, kv := range ev.Attributes {
			evAttrs = append(evAttrs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
		}
		fmt.Fprintf(&b, "  event %s %s\n", ev.Name, strings.Join(evAttrs, " "))
	}
	for _, l := range s.Links {
		lAttrs := make([]string, 0, len(l.Attributes))
		for _, kv := range l.Attributes {
			lAttrs = append(lAttrs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
		}
		fmt.Fprintf(&b, "  link trace=%s span=%s %s\n", l.SpanContext.TraceID(), l.SpanContext.SpanID(), strings.Join(lAttrs, " "))
	}
	return b.String()
}
