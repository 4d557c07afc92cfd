package emf

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// DefaultNamespace is the CloudWatch namespace used when Options.Namespace is empty.
const DefaultNamespace = "idemkit"

// Options configure a Metrics.
type Options struct {
	// Namespace is the CloudWatch metric namespace (default DefaultNamespace).
	Namespace string
	// Dimensions are attached to every metric. The default is one dimension,
	// FunctionName, from AWS_LAMBDA_FUNCTION_NAME (omitted outside Lambda).
	// CloudWatch allows at most 30 dimensions.
	Dimensions map[string]string
	// Now replaces time.Now for the line's timestamp (for tests).
	Now func() time.Time
}

// Metrics writes one EMF line per reported outcome.
type Metrics struct {
	mu   sync.Mutex
	w    io.Writer
	opts Options
	dims []string
}

// New returns a Metrics writing to w (os.Stdout in Lambda, where stdout goes to
// CloudWatch Logs).
func New(w io.Writer, optFns ...func(*Options)) *Metrics {
	opts := Options{Namespace: DefaultNamespace, Now: time.Now}
	if fn := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		opts.Dimensions = map[string]string{"FunctionName": fn}
	}
	for _, fn := range optFns {
		fn(&opts)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	dims := make([]string, 0, len(opts.Dimensions))
	for k := range opts.Dimensions {
		dims = append(dims, k)
	}
	return &Metrics{w: w, opts: opts, dims: dims}
}

type metricDef struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// Hook is an outcome hook for idempotent.WithOutcomeHook.
func (m *Metrics) Hook(_ context.Context, e idempotent.Event) {
	line := make(map[string]any, len(m.opts.Dimensions)+5)
	for k, v := range m.opts.Dimensions {
		line[k] = v
	}
	defs := []metricDef{{Name: e.Outcome.String(), Unit: "Count"}}
	line[e.Outcome.String()] = 1
	if e.TookOver {
		defs = append(defs, metricDef{Name: "took_over", Unit: "Count"})
		line["took_over"] = 1
	}
	if e.FromCache {
		defs = append(defs, metricDef{Name: "from_cache", Unit: "Count"})
		line["from_cache"] = 1
	}
	defs = append(defs, metricDef{Name: "duration_ms", Unit: "Milliseconds"})
	line["duration_ms"] = float64(e.Duration.Microseconds()) / 1000
	line["_aws"] = metadata{
		Timestamp: m.opts.Now().UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace:  m.opts.Namespace,
			Dimensions: [][]string{m.dims},
			Metrics:    defs,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return // only plain values are marshaled; cannot happen
	}
	b = append(b, '\n')
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.w.Write(b) // a metrics line is best effort; never fail the invocation
}
