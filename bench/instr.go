package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client instructions per invocation: the gate of §2, §9 and §10 (issue 35,
// item 6). CPU seconds on 2 shared cores drift by several percent between
// two runs of the same driver, more than the few points a ceiling is about;
// the instructions a process executes do not depend on what else the
// machine runs. valgrind's callgrind counts them (perf's hardware counters
// are not available on these VMs).
//
// Method: the Go driver (idembench drive, the one §2's client CPU runs)
// under callgrind, one process per path, each on a table of its own. The
// driver calls callgrindZero just before a measured phase and callgrindDump
// just after it; callgrind runs with --zero-before and --dump-before on
// them, so each dump holds exactly one phase's instructions, every thread's
// (goroutines, the runtime, the garbage collector, the SDK's connection
// goroutines), and none of start-up, warm-up or the bookkeeping around a
// phase. That is exact at the instruction, where running two invocation
// counts and taking the difference would cancel start-up only as far as two
// start-ups execute the same instructions, and takes half the runs. One
// invocation at a time (-c 1, as Lambda sends them), GOMAXPROCS=1 and no
// asynchronous preemption (its signals follow the wall clock, which valgrind
// slows), and a full collection before each phase with the collector off
// during it (GOGC=off), so that what varies with timing (idle Ps spinning,
// preemption, where a collection falls) stays out of the count. The
// collector is left out because where its cycles fall is a step function:
// with it on (even stop-the-world), one more cycle in a phase of 150
// invocations moved a ratio by about 4 points, and the ratio read 1.06 at
// N=100 and 1.10 at N=150 for one build. What it would cost follows the heap
// each invocation allocates, which the report gives beside the count
// (allocation itself, mallocgc, is counted).

// callgrindGODEBUG is the drivers' GODEBUG under callgrind: no RDTSCP
// (valgrind 3.19 cannot run it, and Go's runtime uses it where the CPU has
// it) and no asynchronous preemption (its signals follow the wall clock,
// which valgrind slows 50-fold). The drivers also run with GOGC=off: the
// collector runs only where the driver calls runtime.GC, between phases.
const callgrindGODEBUG = "cpu.rdtscp=off,asyncpreemptoff=1"

// instrCeilings are the ceilings on client instructions per invocation,
// wrapped / bare, by door (drive's -door).
var instrCeilings = map[string]float64{"wrap": 1.03, "http": 1.05, "apigw": 1.05}

// errNoValgrind is the one line the harness fails with when valgrind is
// missing and a section that counts instructions is to run.
var errNoValgrind = errors.New("valgrind not found: §2, §9 and §10 count client instructions with its callgrind; install the Debian package valgrind (scripts/ci-deps.sh bench does)")

// requireValgrind returns errNoValgrind when valgrind is not on PATH.
func requireValgrind() error {
	if _, err := exec.LookPath("valgrind"); err != nil {
		return errNoValgrind
	}
	return nil
}

// instrRun is one driver process under callgrind: its phases, as it printed
// them (their CPU times are valgrind's, not the driver's: not reported), and
// the instructions callgrind counted in each.
type instrRun struct {
	Phases []phaseResult
	Ir     map[string]int64 // by phase
	Wall   time.Duration
}

// perInv is the run's instructions per invocation in phase (0 if absent).
func (r instrRun) perInv(phase string) float64 {
	for _, p := range r.Phases {
		if p.Phase == phase && p.N > 0 {
			return float64(r.Ir[phase]) / float64(p.N)
		}
	}
	return 0
}

// phase is the run's phaseResult of phase (the zero value if absent).
func (r instrRun) phase(phase string) phaseResult {
	for _, p := range r.Phases {
		if p.Phase == phase {
			return p
		}
	}
	return phaseResult{}
}

// instrPairs is a front door's client instructions per invocation against
// its floor's, in several rounds of one wrapped and one bare driver run.
type instrPairs struct {
	Door            string
	N, Warm, Rounds int
	Runs            map[string][]instrRun // by path: "wrapped", "bare"; one per round
	Wall            time.Duration         // the whole of the door's callgrind runs
}

// ratio is the median over rounds of wrapped / bare instructions per
// invocation in phase: the gate.
func (p instrPairs) ratio(phase string) spread {
	return spreadOf(pairRatios(p.per("wrapped", phase), p.per("bare", phase)))
}

// ratios are the rounds' wrapped / bare ratios in phase.
func (p instrPairs) ratios(phase string) []float64 {
	return pairRatios(p.per("wrapped", phase), p.per("bare", phase))
}

// self are the wrapped driver's rounds against each other in phase (round
// i+1 / round i): the same driver twice, whose true ratio is 1.
func (p instrPairs) self(phase string) []float64 {
	w := p.per("wrapped", phase)
	if len(w) < 2 {
		return nil
	}
	return pairRatios(w[1:], w[:len(w)-1])
}

// per is path's instructions per invocation in phase, one per round.
func (p instrPairs) per(path, phase string) []float64 {
	var v []float64
	for _, r := range p.Runs[path] {
		v = append(v, r.perInv(phase))
	}
	return v
}

// metric is f of path's phase, one per round.
func (p instrPairs) metric(path, phase string, f func(phaseResult) float64) spread {
	var v []float64
	for _, r := range p.Runs[path] {
		if x := r.phase(phase); x.N > 0 {
			v = append(v, f(x))
		}
	}
	return spreadOf(v)
}

// ok reports whether the door met its ceiling in every phase measured.
func (p instrPairs) ok() bool {
	ceiling, known := instrCeilings[p.Door]
	if !known || len(p.Runs["wrapped"]) == 0 || len(p.Runs["bare"]) == 0 {
		return false
	}
	for _, phase := range []string{"new", "replay"} {
		if r := p.ratio(phase); r.Runs == 0 || r.Median > ceiling {
			return false
		}
	}
	return true
}

// pairRatios is a[i] / b[i] for each i both have (b[i] > 0).
func pairRatios(a, b []float64) []float64 {
	var v []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			v = append(v, a[i]/b[i])
		}
	}
	return v
}

// relSpread is (max − min) / median of v: how far the rounds of one path
// stray from each other (0 if fewer than two).
func relSpread(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := spreadOf(v).Median
	if m == 0 {
		return 0
	}
	return (slices.Max(v) - slices.Min(v)) / m
}

// instrArgs are the driver's arguments for door's callgrind runs.
func instrArgs(door string, c config) []string {
	return []string{"-door", door, "-n", strconv.Itoa(c.InstrN), "-c", "1", "-warmup", strconv.Itoa(c.InstrWarmup),
		"-phases", "new,replay", "-callgrind"}
}

// runInstrPairs runs door's driver under callgrind, wrapped and bare,
// c.InstrRounds times; the two paths of a round run at once (callgrind runs
// a process on one core, and the count does not depend on the other).
func runInstrPairs(ctx context.Context, e *env, door, dir string, c config, progress func(string)) (instrPairs, error) {
	res := instrPairs{Door: door, N: c.InstrN, Warm: c.InstrWarmup, Rounds: c.InstrRounds, Runs: map[string][]instrRun{}}
	began := time.Now()
	defer func() { res.Wall = time.Since(began) }()
	args := instrArgs(door, c)
	for round := range c.InstrRounds {
		progress(fmt.Sprintf("client instructions (callgrind), round %d/%d: %s, wrapped and bare at once, %d new keys and their replays, one at a time",
			round+1, c.InstrRounds, door, c.InstrN))
		var runs [2]instrRun
		var errs [2]error
		var wg sync.WaitGroup
		for i, path := range []string{"wrapped", "bare"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := slices.Concat(args, []string{"-bare=" + strconv.FormatBool(path == "bare")})
				out := filepath.Join(dir, fmt.Sprintf("callgrind.%s.%s.%d", door, path, round+1))
				runs[i], errs[i] = e.driveCallgrind(ctx, out, a)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			res.Wall = time.Since(began)
			return res, err
		}
		res.Runs["wrapped"] = append(res.Runs["wrapped"], runs[0])
		res.Runs["bare"] = append(res.Runs["bare"], runs[1])
	}
	res.Wall = time.Since(began)
	return res, nil
}

// driveCallgrind runs one Go driver with args under callgrind, on a table of
// its own, its out files at out.<part>, and returns its phases with the
// instructions of each.
func (e *env) driveCallgrind(ctx context.Context, out string, args []string) (instrRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a run takes tens of seconds; never hang make bench
	defer cancel()
	var run instrRun
	table, err := createTable(ctx, e.client, "instr")
	if err != nil {
		return run, err
	}
	defer deleteTable(e.client, table)
	old, _ := filepath.Glob(out + "*")
	for _, f := range old {
		_ = os.Remove(f)
	}
	a := slices.Concat([]string{"--tool=callgrind", "--callgrind-out-file=" + out,
		"--zero-before=main.callgrindZero", "--dump-before=main.callgrindDump", e.self, "drive"},
		args, []string{"-table", table, "-event", filepath.Join(e.root, "bench", "testdata", "payment-event.json")})
	cmd := exec.CommandContext(ctx, "valgrind", a...)
	cmd.Dir = e.root
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GOGC=off", "GODEBUG="+callgrindGODEBUG)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return run, fmt.Errorf("driver under callgrind (valgrind %s): %w\n%s", strings.Join(a, " "), err, lastLines(stderr.String(), 20))
	}
	run.Wall = time.Since(began)
	if run.Phases, err = parsePhases(&stdout); err != nil {
		return run, fmt.Errorf("driver under callgrind: %w", err)
	}
	dumps, err := readCallgrindDumps(out)
	if err != nil {
		return run, err
	}
	if run.Ir, err = phaseInstructions(run.Phases, dumps); err != nil {
		return run, fmt.Errorf("%s: %w", out, err)
	}
	return run, nil
}

// parsePhases reads a driver's JSON lines; a phase with unexpected errors
// is an error.
func parsePhases(r io.Reader) ([]phaseResult, error) {
	var out []phaseResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var p phaseResult
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("bad output %q: %w", sc.Text(), err)
		}
		if p.Errors > 0 {
			return nil, fmt.Errorf("%d unexpected errors in phase %s, the first: %s", p.Errors, p.Phase, p.FirstError)
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// callgrindOut is what one callgrind out file says of itself: its part
// (dumps are numbered from 1), what triggered it, and its instructions.
type callgrindOut struct {
	Part    int
	Trigger string
	Ir      int64
}

// phaseDump reports whether the dump was made by the driver's end-of-phase
// mark (not at the program's exit).
func (d callgrindOut) phaseDump() bool {
	return strings.Contains(d.Trigger, "callgrindDump")
}

// parseCallgrindOut reads the header and totals of a callgrind out file:
// "part:", "desc: Trigger:", "events:" (Ir must be among them), then
// "summary:" in the header and "totals:" at the end, the costs in the
// order of events:. totals: wins when both are there; one of them must be.
func parseCallgrindOut(r io.Reader) (callgrindOut, error) {
	var d callgrindOut
	col := -1
	var summary, totals []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(key, " \t") {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "part":
			n, err := strconv.Atoi(val)
			if err != nil {
				return d, fmt.Errorf("callgrind out: bad part: %q", line)
			}
			d.Part = n
		case "desc":
			if t, ok := strings.CutPrefix(val, "Trigger:"); ok {
				d.Trigger = strings.TrimSpace(t)
			}
		case "events":
			col = slices.Index(strings.Fields(val), "Ir")
		case "summary":
			summary = strings.Fields(val)
		case "totals":
			totals = strings.Fields(val)
		}
	}
	if err := sc.Err(); err != nil {
		return d, err
	}
	if col < 0 {
		return d, errors.New("callgrind out: no events: line with Ir")
	}
	costs := totals
	if costs == nil {
		costs = summary
	}
	if costs == nil {
		return d, errors.New("callgrind out: neither a totals line nor a summary line")
	}
	if col >= len(costs) {
		return d, fmt.Errorf("callgrind out: %d costs, Ir is event %d", len(costs), col+1)
	}
	n, err := strconv.ParseInt(costs[col], 10, 64)
	if err != nil || n < 0 {
		return d, fmt.Errorf("callgrind out: bad Ir %q", costs[col])
	}
	d.Ir = n
	return d, nil
}

// readCallgrindDumps reads every out file of one run (out, out.1, out.2,
// ...), in the order of their parts.
func readCallgrindDumps(out string) ([]callgrindOut, error) {
	files, err := filepath.Glob(out + "*")
	if err != nil {
		return nil, err
	}
	var dumps []callgrindOut
	for _, f := range files {
		if f != out && !strings.HasPrefix(f, out+".") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d, err := parseCallgrindOut(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		dumps = append(dumps, d)
	}
	slices.SortFunc(dumps, func(a, b callgrindOut) int { return a.Part - b.Part })
	return dumps, nil
}

// phaseInstructions pairs the driver's phases with its end-of-phase dumps,
// in order (the dump at the program's exit is start-up's remains and the
// exit: left out); each phase must have its dump.
func phaseInstructions(phases []phaseResult, dumps []callgrindOut) (map[string]int64, error) {
	var marked []callgrindOut
	for _, d := range dumps {
		if d.phaseDump() {
			marked = append(marked, d)
		}
	}
	if len(marked) != len(phases) {
		return nil, fmt.Errorf("%d phases but %d end-of-phase dumps (is main.callgrindDump in the binary?)", len(phases), len(marked))
	}
	ir := make(map[string]int64, len(phases))
	for i, p := range phases {
		if _, dup := ir[p.Phase]; dup {
			return nil, fmt.Errorf("phase %s twice", p.Phase)
		}
		ir[p.Phase] = marked[i].Ir
	}
	return ir, nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// measureInstr is runInstrPairs for a section: the pairs, or why they were
// not measured.
func measureInstr(ctx context.Context, e *env, door, dir string, c config, progress func(string)) (instrPairs, string) {
	res, err := runInstrPairs(ctx, e, door, dir, c, progress)
	if err != nil {
		progress("client instructions FAILED: " + firstLine(err.Error()))
		return res, err.Error()
	}
	progress(fmt.Sprintf("client instructions: %s's callgrind runs took %s", door, res.Wall.Round(time.Second)))
	return res, ""
}

// instrGate is one door's instruction ceiling, as the command's exit
// status sees it.
type instrGate struct {
	name string
	ok   bool
}

// instrDoors are the doors whose instructions the run was to count: their
// section, the name the report gives them, their pairs and why they were
// not measured ("" if they were).
func (r *report) instrDoors() []struct {
	section, name string
	pairs         instrPairs
	err           string
} {
	type door = struct {
		section, name string
		pairs         instrPairs
		err           string
	}
	var out []door
	if r.cfg.runs(2) {
		out = append(out, door{"2", "Wrap", r.floorInstr, firstNonEmpty(r.floorErr, r.floorInstrErr)})
	}
	if r.cfg.runs(9) {
		d := door{"9", "net/http middleware", instrPairs{}, r.httpErr}
		if r.http != nil {
			d.pairs, d.err = r.http.Instr, firstNonEmpty(r.httpErr, r.http.InstrErr)
		}
		out = append(out, d)
	}
	if r.cfg.runs(10) {
		d := door{"10", "API Gateway (WrapV2)", instrPairs{}, r.apigwErr}
		if r.apigw != nil {
			d.pairs, d.err = r.apigw.Instr, firstNonEmpty(r.apigwErr, r.apigw.InstrErr)
		}
		out = append(out, d)
	}
	for i := range out {
		if out[i].err == "" && len(out[i].pairs.Runs) == 0 {
			out[i].err = "not run"
		}
	}
	return out
}

// instrGates are the ceilings on client instructions the run checked: a
// door missed, or not measured, makes the command fail.
func (r *report) instrGates() []instrGate {
	var g []instrGate
	for _, d := range r.instrDoors() {
		switch {
		case d.err != "":
			g = append(g, instrGate{d.name + " (not measured: " + firstLine(d.err) + ")", false})
		default:
			g = append(g, instrGate{d.name, d.pairs.ok()})
		}
	}
	return g
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
