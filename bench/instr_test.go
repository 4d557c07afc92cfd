package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A callgrind out file's header and totals, as valgrind 3.19 writes them for
// a dump made by --dump-before (the costs in between elided).
const callgrindPhaseDump = `# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 12545
cmd:  /tmp/idembench drive -door wrap
part: 2

desc: I1 cache: 
desc: Timerange: Basic block 1375961 - 2375961
desc: Trigger: --dump-before=main.callgrindDump

positions: line
events: Ir
summary: 46836297

ob=(1) /tmp/idembench
fl=(1) /tmp/bench/drive.go
fn=(1) main.runPhase
12 40
calls=1 14
14 46836257

totals: 46836297
`

func TestParseCallgrindOut(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     callgrindOut
		phase    bool
		err      string
	}{
		{name: "a phase's dump", in: callgrindPhaseDump,
			want: callgrindOut{Part: 2, Trigger: "--dump-before=main.callgrindDump", Ir: 46836297}, phase: true},
		{name: "at exit", in: "part: 3\ndesc: Trigger: Program termination\nevents: Ir\nsummary: 6783419\ntotals: 6783419\n",
			want: callgrindOut{Part: 3, Trigger: "Program termination", Ir: 6783419}},
		{name: "totals win over summary", in: "events: Ir\nsummary: 5\ntotals: 7\n", want: callgrindOut{Ir: 7}},
		{name: "summary alone", in: "events: Ir\nsummary: 5\n", want: callgrindOut{Ir: 5}},
		{name: "Ir among other events", in: "events: Dr Ir Dw\ntotals: 1 2 3\n", want: callgrindOut{Ir: 2}},
		{name: "cost lines are not keys", in: "events: Ir\nfn=(1) a:b\n12 40\ntotals: 9\n", want: callgrindOut{Ir: 9}},
		{name: "no Ir", in: "events: Dr\ntotals: 1\n", err: "no events: line with Ir"},
		{name: "no events line", in: "totals: 1\n", err: "no events: line with Ir"},
		{name: "no totals", in: "events: Ir\n", err: "neither a totals line nor a summary line"},
		{name: "too few costs", in: "events: Dr Ir\ntotals: 1\n", err: "1 costs, Ir is event 2"},
		{name: "bad count", in: "events: Ir\ntotals: many\n", err: "bad Ir"},
		{name: "negative count", in: "events: Ir\ntotals: -4\n", err: "bad Ir"},
		{name: "bad part", in: "part: x\nevents: Ir\ntotals: 1\n", err: "bad part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCallgrindOut(strings.NewReader(tc.in))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.phase, got.phaseDump())
		})
	}
}

func TestPhaseInstructions(t *testing.T) {
	phase := func(name string) phaseResult { return phaseResult{Phase: name, N: 100} }
	dump := func(part int, trigger string, ir int64) callgrindOut {
		return callgrindOut{Part: part, Trigger: trigger, Ir: ir}
	}
	const mark, exit = "--dump-before=main.callgrindDump", "Program termination"
	for _, tc := range []struct {
		name   string
		phases []phaseResult
		dumps  []callgrindOut
		want   map[string]int64
		err    string
	}{
		{name: "one dump per phase, the exit's left out",
			phases: []phaseResult{phase("new"), phase("replay")},
			dumps:  []callgrindOut{dump(1, mark, 90_000_000), dump(2, mark, 60_000_000), dump(3, exit, 7_000_000)},
			want:   map[string]int64{"new": 90_000_000, "replay": 60_000_000}},
		{name: "a phase without its dump", phases: []phaseResult{phase("new"), phase("replay")},
			dumps: []callgrindOut{dump(1, mark, 1), dump(2, exit, 1)}, err: "2 phases but 1 end-of-phase dumps"},
		{name: "no marks at all (a binary without the markers)", phases: []phaseResult{phase("new")},
			dumps: []callgrindOut{dump(1, exit, 1)}, err: "1 phases but 0"},
		{name: "a phase twice", phases: []phaseResult{phase("new"), phase("new")},
			dumps: []callgrindOut{dump(1, mark, 1), dump(2, mark, 2)}, err: "phase new twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := phaseInstructions(tc.phases, tc.dumps)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// run is a driver run of n new keys and n replays that executed newIr and
// replayIr instructions in its two phases.
func run(n int, newIr, replayIr int64) instrRun {
	return instrRun{
		Phases: []phaseResult{{Phase: "new", N: n}, {Phase: "replay", N: n}},
		Ir:     map[string]int64{"new": newIr, "replay": replayIr},
	}
}

func TestInstrPairsArithmetic(t *testing.T) {
	p := instrPairs{Door: "wrap", N: 200, Runs: map[string][]instrRun{
		"wrapped": {run(200, 204_000_000, 102_000_000), run(200, 206_000_000, 101_000_000), run(200, 205_000_000, 103_000_000)},
		"bare":    {run(200, 200_000_000, 100_000_000), run(200, 200_000_000, 100_000_000), run(200, 200_000_000, 100_000_000)},
	}}
	assert.Equal(t, []float64{1_020_000, 1_030_000, 1_025_000}, p.per("wrapped", "new"), "instructions per invocation: a phase's count over its invocations")
	assert.InDeltaSlice(t, []float64{1.02, 1.03, 1.025}, p.ratios("new"), 1e-12)
	assert.InDelta(t, 1.025, p.ratio("new").Median, 1e-12, "the gate: the median of the rounds' ratios")
	assert.InDelta(t, 1.02, p.ratio("replay").Median, 1e-12)
	assert.InDeltaSlice(t, []float64{1_030_000.0 / 1_020_000, 1_025_000.0 / 1_030_000}, p.self("new"), 1e-12, "each wrapped round over the one before")
	assert.InDelta(t, 10_000.0/1_025_000, relSpread(p.per("wrapped", "new")), 1e-12)
	assert.Zero(t, relSpread(p.per("bare", "new")))
	assert.Zero(t, p.per("wrapped", "mixed")[0], "a phase the run did not have")
}

func TestInstrCeiling(t *testing.T) {
	pairs := func(door string, newRatio, replayRatio float64) instrPairs {
		return instrPairs{Door: door, Runs: map[string][]instrRun{
			"wrapped": {run(100, int64(newRatio*1e8), int64(replayRatio*1e8))},
			"bare":    {run(100, 1e8, 1e8)},
		}}
	}
	for _, tc := range []struct {
		name string
		p    instrPairs
		ok   bool
	}{
		{"Wrap under 1.03", pairs("wrap", 1.029, 1.01), true},
		{"Wrap at 1.03", pairs("wrap", 1.03, 1.03), true},
		{"Wrap's replay over 1.03", pairs("wrap", 1.01, 1.031), false},
		{"the middleware at 1.04: its ceiling is 1.05", pairs("http", 1.04, 1.04), true},
		{"the middleware over 1.05", pairs("http", 1.051, 1.0), false},
		{"API Gateway under 1.05", pairs("apigw", 1.049, 1.049), true},
		{"API Gateway over 1.05", pairs("apigw", 1.0, 1.06), false},
		{"a door without a ceiling", pairs("other", 1.0, 1.0), false},
		{"nothing measured", instrPairs{Door: "wrap"}, false},
		{"no bare runs", instrPairs{Door: "wrap", Runs: map[string][]instrRun{"wrapped": {run(1, 1, 1)}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.ok, tc.p.ok())
		})
	}
}

func TestInstrGates(t *testing.T) {
	met := instrPairs{Door: "wrap", Runs: map[string][]instrRun{"wrapped": {run(1, 101, 101)}, "bare": {run(1, 100, 100)}}}
	missed := instrPairs{Door: "http", Runs: map[string][]instrRun{"wrapped": {run(1, 110, 100)}, "bare": {run(1, 100, 100)}}}
	for _, tc := range []struct {
		name string
		r    *report
		want []instrGate
	}{
		{name: "sections not run check nothing", r: &report{cfg: config{Only: "1"}}},
		{name: "met and missed",
			r:    &report{cfg: config{Only: "2,9"}, floorInstr: met, http: &httpResult{Instr: missed}},
			want: []instrGate{{"Wrap", true}, {"net/http middleware", false}}},
		{name: "not measured fails",
			r: &report{cfg: config{Only: "2,10"}, floorInstrErr: "valgrind: exit status 1\nmore", apigw: &apigwResult{}},
			want: []instrGate{{"Wrap (not measured: valgrind: exit status 1)", false},
				{"API Gateway (WrapV2) (not measured: not run)", false}}},
		{name: "the section's own failure fails it too",
			r:    &report{cfg: config{Only: "9"}, httpErr: "go test -c: exit status 1", http: &httpResult{}},
			want: []instrGate{{"net/http middleware (not measured: go test -c: exit status 1)", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.r.instrGates())
		})
	}
}
