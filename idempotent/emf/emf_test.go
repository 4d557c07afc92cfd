package emf_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/emf"
)

type line struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	Fields map[string]any `json:"-"`
}

func parse(t *testing.T, buf *bytes.Buffer) []line {
	t.Helper()
	var out []line
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var l line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l.Fields))
		out = append(out, l)
	}
	return out
}

func TestOutcomesAreCountedAsEMF(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "payments")
	var buf bytes.Buffer
	now := time.UnixMilli(1_800_000_000_123)
	metrics := emf.New(&buf, func(o *emf.Options) {
		o.Namespace = "shop"
		o.Dimensions["Stage"] = "test"
		o.Now = func() time.Time { return now }
	})
	store := idempotent.NewMemoryStore()
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(metrics.Hook)), func(_ context.Context, id string) (string, error) {
		if id == "fail" {
			return "", errors.New("boom")
		}
		return "ok " + id, nil
	}, idempotent.WithKey(func(id string) (string, error) { return id, nil }))

	for _, id := range []string{"a", "a", "fail", ""} {
		_, _ = h(context.Background(), id)
	}
	lines := parse(t, &buf)
	require.Len(t, lines, 4)
	var names []string
	for _, l := range lines {
		require.Len(t, l.AWS.CloudWatchMetrics, 1)
		d := l.AWS.CloudWatchMetrics[0]
		assert.Equal(t, "shop", d.Namespace)
		require.Len(t, d.Dimensions, 1)
		dims := append([]string(nil), d.Dimensions[0]...)
		sort.Strings(dims)
		assert.Equal(t, []string{"FunctionName", "Stage"}, dims)
		assert.Equal(t, "payments", l.Fields["FunctionName"])
		assert.Equal(t, "test", l.Fields["Stage"])
		assert.Equal(t, now.UnixMilli(), l.AWS.Timestamp)
		for _, m := range d.Metrics {
			assert.Contains(t, l.Fields, m.Name, "every declared metric has a value")
		}
		names = append(names, d.Metrics[0].Name)
		assert.EqualValues(t, 1, l.Fields[d.Metrics[0].Name])
	}
	assert.Equal(t, []string{"executed", "replayed", "handler_error", "rejected"}, names)
}

func TestTakeoverAndCacheFlags(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	var buf bytes.Buffer
	metrics := emf.New(&buf)
	metrics.Hook(context.Background(), idempotent.Event{Outcome: idempotent.OutcomeExecuted, TookOver: true, Duration: 1500 * time.Microsecond})
	metrics.Hook(context.Background(), idempotent.Event{Outcome: idempotent.OutcomeReplayed, FromCache: true})
	metrics.Hook(context.Background(), idempotent.Event{Outcome: idempotent.OutcomeExecuted, Resumed: true})
	lines := parse(t, &buf)
	require.Len(t, lines, 3)
	assert.EqualValues(t, 1, lines[2].Fields["resumed"])
	assert.NotContains(t, lines[2].Fields, "took_over", "a resume is not a takeover")
	assert.NotContains(t, lines[0].Fields, "resumed")
	assert.EqualValues(t, 1, lines[0].Fields["took_over"])
	assert.InDelta(t, 1.5, lines[0].Fields["duration_ms"], 1e-9)
	assert.EqualValues(t, 1, lines[1].Fields["from_cache"])
	assert.Equal(t, emf.DefaultNamespace, lines[0].AWS.CloudWatchMetrics[0].Namespace)
	assert.Equal(t, [][]string{{}}, lines[0].AWS.CloudWatchMetrics[0].Dimensions, "no dimensions outside Lambda")
}

func TestDimensionRules(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	tooMany := map[string]string{}
	for i := range 31 {
		tooMany[fmt.Sprintf("d%02d", i)] = "v"
	}
	tests := []struct {
		name string
		dims map[string]string
		want string // the panic's message; "" for none
	}{
		{"added outside Lambda", map[string]string{"Stage": "test"}, ""},
		{"named like a metric", map[string]string{"executed": "x"}, `emf: New: dimension "executed" has the name of a metric or of the EMF metadata`},
		{"named like a flag", map[string]string{"took_over": "x"}, `emf: New: dimension "took_over" has the name of a metric or of the EMF metadata`},
		{"the metadata", map[string]string{"_aws": "x"}, `emf: New: dimension "_aws" has the name of a metric or of the EMF metadata`},
		{"empty value", map[string]string{"Stage": ""}, `emf: New: dimension "Stage" has an empty value`},
		{"empty name", map[string]string{"": "x"}, "emf: New: a dimension with an empty name"},
		{"too many", tooMany, "emf: New: 31 dimensions, CloudWatch allows at most 30"},
		{"a blank value", map[string]string{"Stage": "  "}, `emf: New: dimension "Stage": names and values must be printable ASCII, not all spaces`},
		{"not ASCII", map[string]string{"Stäge": "x"}, `emf: New: dimension "Stäge": names and values must be printable ASCII, not all spaces`},
		{"a leading colon", map[string]string{":Stage": "x"}, `emf: New: dimension ":Stage" starts with a colon`},
		{"a long value", map[string]string{"Stage": strings.Repeat("v", 1025)}, `emf: New: dimension "Stage" has a value longer than 1024 characters`},
		{"a long name", map[string]string{strings.Repeat("n", 256): "x"}, `emf: New: dimension name "nnnnnnnnnnnnnnnnnnnn"… is longer than 255 characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newMetrics := func() *emf.Metrics {
				return emf.New(io.Discard, func(o *emf.Options) { maps.Copy(o.Dimensions, tt.dims) })
			}
			if tt.want != "" {
				assert.PanicsWithValue(t, tt.want, func() { newMetrics() })
				return
			}
			assert.NotPanics(t, func() { newMetrics() })
		})
	}
}

// The options' map is copied: changing it after New changes no line.
func TestDimensionsAreCopied(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "payments")
	var buf bytes.Buffer
	var dims map[string]string
	m := emf.New(&buf, func(o *emf.Options) { dims = o.Dimensions })
	delete(dims, "FunctionName")
	dims["Later"] = "x"
	m.Hook(context.Background(), idempotent.Event{Outcome: idempotent.OutcomeExecuted})
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	assert.Equal(t, "payments", line["FunctionName"])
	assert.NotContains(t, line, "Later")
}
