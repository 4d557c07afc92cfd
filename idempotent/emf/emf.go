package emf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
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
	// FunctionName, from AWS_LAMBDA_FUNCTION_NAME (omitted outside Lambda);
	// the map is never nil, so an option may add to it. New copies it.
	// CloudWatch's rules apply: at most 30 dimensions; names of 1 to 255 and
	// values of 1 to 1024 printable ASCII characters, not all spaces; no name
	// starting with a colon. And a name may not be "_aws" or a metric's (the
	// outcomes, took_over, resumed, from_cache, duration_ms), which share the line.
	// New panics otherwise: CloudWatch would drop the metrics silently.
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
//
// New panics if the dimensions break the rules in Options.Dimensions: a
// programmer error, found at start-up.
func New(w io.Writer, optFns ...func(*Options)) *Metrics {
	opts := Options{Namespace: DefaultNamespace, Now: time.Now, Dimensions: map[string]string{}}
	if fn := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		opts.Dimensions["FunctionName"] = fn
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
	opts.Dimensions = maps.Clone(opts.Dimensions) // later changes by the caller cannot reach the lines
	if err := checkDimensions(opts.Dimensions); err != nil {
		panic("emf: New: " + err.Error())
	}
	dims := append([]string{}, slices.Sorted(maps.Keys(opts.Dimensions))...) // [] not null in the JSON
	return &Metrics{w: w, opts: opts, dims: dims}
}

// maxDimensions is CloudWatch's limit of dimensions per metric.
const maxDimensions = 30

// checkDimensions enforces the rules of Options.Dimensions. A dimension may
// not share its name with a metric: both are members of the same JSON line.
func checkDimensions(dims map[string]string) error {
	if len(dims) > maxDimensions {
		return fmt.Errorf("%d dimensions, CloudWatch allows at most %d", len(dims), maxDimensions)
	}
	reserved := map[string]bool{"_aws": true, "took_over": true, "resumed": true, "from_cache": true, "duration_ms": true}
	for o := idempotent.Outcome(1); o.String() != "unknown"; o++ {
		reserved[o.String()] = true
	}
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		switch {
		case name == "":
			return errors.New("a dimension with an empty name")
		case dims[name] == "":
			return fmt.Errorf("dimension %q has an empty value", name)
		case reserved[name]:
			return fmt.Errorf("dimension %q has the name of a metric or of the EMF metadata", name)
		case strings.HasPrefix(name, ":"):
			return fmt.Errorf("dimension %q starts with a colon", name)
		case len(name) > 255:
			return fmt.Errorf("dimension name %.20q… is longer than 255 characters", name)
		case len(dims[name]) > 1024:
			return fmt.Errorf("dimension %q has a value longer than 1024 characters", name)
		case !printableASCII(name) || !printableASCII(dims[name]):
			return fmt.Errorf("dimension %q: names and values must be printable ASCII, not all spaces", name)
		}
	}
	return nil
}

// printableASCII reports whether s is printable ASCII with at least one
// character that is not a space.
func printableASCII(s string) bool {
	visible := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' {
			return false
		}
		visible = visible || c != ' '
	}
	return visible
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
	if e.Resumed {
		defs = append(defs, metricDef{Name: "resumed", Unit: "Count"})
		line["resumed"] = 1
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
