package otelidem

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/kafkabatch"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

// w3c formats and parses the traceparent a record keeps.
var w3c = propagation.TraceContext{}

// traceparent is sc as a W3C traceparent, or "" when sc is not valid.
func traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return carrier.Get("traceparent")
}

// parseTraceparent reads a record's trace context; a record of another
// format (or none) yields false.
func parseTraceparent(s string) (trace.SpanContext, bool) {
	if s == "" {
		return trace.SpanContext{}, false
	}
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier{"traceparent": s}))
	return sc, sc.IsValid()
}

// carried returns the producer's trace context that the record or request
// of the front door calling the Engine carries: an SQS message's
// propagator attributes (traceparent) or AWSTraceHeader, a Kafka record's
// headers, an API Gateway request's headers.
func (in *instrumentation) carried(ctx context.Context) (trace.SpanContext, bool) {
	var carrier propagation.TextMapCarrier
	xray := ""
	if m, ok := sqsbatch.MessageFromContext(ctx); ok {
		carrier, xray = sqsCarrier(m.MessageAttributes), m.Attributes["AWSTraceHeader"]
	} else if r, ok := kafkabatch.RecordFromContext(ctx); ok {
		carrier = kafkaCarrier(r.Headers)
	} else if r, ok := apigateway.RequestV2FromContext(ctx); ok {
		carrier = headerCarrier(r.Headers)
	} else if r, ok := apigateway.RequestV1FromContext(ctx); ok {
		carrier = headerCarrier(r.Headers)
	}
	if carrier != nil {
		if sc := trace.SpanContextFromContext(in.propagator.Extract(context.Background(), carrier)); sc.IsValid() {
			return sc, true
		}
	}
	if xray != "" {
		return parseXRay(xray)
	}
	return trace.SpanContext{}, false
}

// sqsCarrier reads an SQS message's String attributes.
func sqsCarrier(attrs map[string]events.SQSMessageAttribute) propagation.TextMapCarrier {
	m := propagation.MapCarrier{}
	for k, a := range attrs {
		if a.StringValue != nil && (a.DataType == "String" || strings.HasPrefix(a.DataType, "String.")) {
			m[strings.ToLower(k)] = *a.StringValue
		}
	}
	return m
}

// kafkaCarrier reads a Kafka record's headers (Lambda hands them over as
// a list of one-entry maps); the first of a repeated name wins.
func kafkaCarrier(headers []map[string]events.JSONNumberBytes) propagation.TextMapCarrier {
	m := propagation.MapCarrier{}
	for _, h := range headers {
		for k, v := range h {
			if _, seen := m[strings.ToLower(k)]; !seen {
				m[strings.ToLower(k)] = string(v)
			}
		}
	}
	return m
}

// headerCarrier reads an API Gateway event's headers, case-insensitively.
func headerCarrier(headers map[string]string) propagation.TextMapCarrier {
	m := propagation.MapCarrier{}
	for k, v := range headers {
		m[strings.ToLower(k)] = v
	}
	return m
}

// parseXRay reads an X-Ray trace header, as SQS puts the sender's in the
// AWSTraceHeader system attribute:
// "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".
// The trace id is the root's 8 hex digits of time and 24 of randomness;
// the parent is the span id.
func parseXRay(h string) (trace.SpanContext, bool) {
	var cfg trace.SpanContextConfig
	var haveRoot, haveParent bool
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			fields := strings.Split(v, "-")
			if len(fields) != 3 || fields[0] != "1" || len(fields[1]) != 8 || len(fields[2]) != 24 {
				return trace.SpanContext{}, false
			}
			id, err := trace.TraceIDFromHex(fields[1] + fields[2])
			if err != nil {
				return trace.SpanContext{}, false
			}
			cfg.TraceID, haveRoot = id, true
		case "Parent":
			id, err := trace.SpanIDFromHex(v)
			if err != nil {
				return trace.SpanContext{}, false
			}
			cfg.SpanID, haveParent = id, true
		case "Sampled":
			if v == "1" {
				cfg.TraceFlags = trace.FlagsSampled
			}
		}
	}
	if !haveRoot || !haveParent {
		return trace.SpanContext{}, false
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// Extract returns next behind a handler that continues the caller's trace
// from the request's headers (a traceparent, by the propagator of
// WithPropagator, default otel.GetTextMapPropagator() or W3C Trace
// Context) when the request's context carries no span yet: put it outside
// nethttp.Middleware on a server without otelhttp. It starts no span of
// its own; behind otelhttp.NewHandler it changes nothing.
func Extract(next http.Handler, opts ...Option) http.Handler {
	c := config{}
	for _, opt := range opts {
		opt(&c)
	}
	p := c.propagator
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if trace.SpanContextFromContext(r.Context()).IsValid() {
			next.ServeHTTP(w, r)
			return
		}
		prop := p
		if prop == nil {
			prop = defaultPropagator()
		}
		next.ServeHTTP(w, r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}
