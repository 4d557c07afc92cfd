package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPGFloor runs §11 small on the server at POSTGRES_URL: every round-trip
// target met, every path measured, and the section and its Target rows
// written.
func TestPGFloor(t *testing.T) {
	if os.Getenv("POSTGRES_URL") == "" {
		if os.Getenv("IDEMKIT_REQUIRE_POSTGRES") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_POSTGRES=1 but POSTGRES_URL is not set")
		}
		t.Skip("no POSTGRES_URL: run under scripts/with-postgres.sh")
	}
	tmpl, err := loadPaymentEvent(".")
	require.NoError(t, err)
	r, err := runPGFloor(t.Context(), tmpl, 3, 30, 10)
	require.NoError(t, err)
	assert.Empty(t, r.failed())
	require.Len(t, r.Calls, 4)
	for _, c := range r.Calls {
		assert.Equal(t, []int{c.Target, c.Target, c.Target}, c.Calls, c.Scenario)
	}
	require.Len(t, r.Cases, 2)
	for _, c := range r.Cases {
		require.Len(t, c.Paths, 3)
		for _, p := range c.Paths {
			assert.Equal(t, 30, p.Latency.N, "%s, %s", c.Case, p.Name)
			assert.Equal(t, []int{p.Target}, p.Trips, "%s, %s", c.Case, p.Name)
		}
	}
	assert.Equal(t, []int{5}, r.Cases[0].wrapped().Trips, "new key: claim, BEGIN, INSERT, completion, COMMIT")
	assert.Contains(t, r.Server, "PostgreSQL ")

	rep := &report{pg: r, cfg: config{PGFloorWarmup: 10}}
	var out strings.Builder
	rep.writePGFloor(func(format string, args ...any) { fmt.Fprintf(&out, format, args...) })
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), "| new key, one INSERT in pgstore.Tx | executed, the row committed with the record | 5 | 5 (all 3 runs) | met |")
	targets := rep.pgTargets()
	assert.Len(t, targets, 4+2+2)
}

// TestPGFailed lists a missed round-trip target, whether from a scenario or
// from an invocation of the latency run.
func TestPGFailed(t *testing.T) {
	r := &pgResult{
		Calls: []callsResult{{Scenario: "replay", Target: 1, Calls: []int{1, 2}}, {Scenario: "new key", Target: 2, Calls: []int{2}}},
		Cases: []pgCase{{Case: "new key", Paths: []pgPath{{Name: "bare", Target: 1, Trips: []int{1}}, {Name: "wrapped", Target: 5, Trips: []int{5, 6}}}}},
	}
	assert.Equal(t, []string{"PostgreSQL replay", "PostgreSQL new key, wrapped"}, r.failed())
	assert.Nil(t, (*pgResult)(nil).failed())
}
