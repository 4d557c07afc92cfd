package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "drive" {
		err = driveMain(os.Args[2:])
	} else {
		err = benchMain(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

// config is the run's parameters, printed in the report.
type config struct {
	Out, Root, Build, Cmd string

	CallsReps                               int
	FloorN, FloorWarmup, FloorRuns          int
	CPUN, CPUC, CPUWarmup, CPURounds        int
	CPUSelfRounds                           int
	InstrN, InstrWarmup, InstrRounds        int
	CompareN, CompareC, CompareRounds, Warm int
	RedisFloorN, RedisFloorWarmup           int
	PGFloorN, PGFloorWarmup                 int
	CapacityN, CapacityC, CapacityWarmup    int
	ScaleN, ScaleN1                         int
	ScaleDups                               float64
	ColdReps                                int
	BatchRuns, BatchRunsOthers              int
	BenchCount                              int
	Benchtime                               string
	Only                                    string
	CPUProfile                              string
}

// runs reports whether section (1 to 12) is to run.
func (c *config) runs(section int) bool {
	if c.Only == "" {
		return true
	}
	return slices.Contains(strings.Split(c.Only, ","), strconv.Itoa(section))
}

func benchMain(args []string) error {
	var c config
	fs := flag.NewFlagSet("idembench", flag.ContinueOnError)
	fs.StringVar(&c.Out, "out", "BENCHMARKS.md", "the report to write")
	fs.StringVar(&c.Root, "root", ".", "the repository root")
	fs.StringVar(&c.Build, "build", "build/bench", "where binaries and raw outputs go")
	fs.StringVar(&c.Cmd, "cmd", "", "the command that ran this, for the report (make bench passes it)")
	fs.IntVar(&c.CallsReps, "calls-reps", 5, "repetitions of each calls-per-invocation scenario")
	fs.IntVar(&c.FloorN, "floor-n", 2000, "wrapped and bare invocations of each case (floor)")
	fs.IntVar(&c.FloorWarmup, "floor-warmup", 200, "unmeasured warm-up invocations (floor)")
	fs.IntVar(&c.FloorRuns, "floor-runs", 6, "runs the floor's invocations are split into; the gate is the median of their ratios")
	fs.IntVar(&c.CPUN, "cpu-n", 2000, "new keys, then their replays, per driver run (client CPU against the floor)")
	fs.IntVar(&c.CPUC, "cpu-c", 4, "invocations in flight (client CPU against the floor)")
	fs.IntVar(&c.CPUWarmup, "cpu-warmup", 300, "unmeasured warm-up invocations per driver run (client CPU against the floor)")
	fs.IntVar(&c.CPURounds, "cpu-rounds", 14, "driver runs of each path, wrapped and bare, alternating (client CPU against the floor)")
	fs.IntVar(&c.CPUSelfRounds, "cpu-self-rounds", 8, "rounds of §2's wrapped driver against itself (the client CPU gates' resolution)")
	fs.IntVar(&c.InstrN, "instr-n", 150, "new keys, then their replays, per driver run under callgrind (client instructions against the floor)")
	fs.IntVar(&c.InstrWarmup, "instr-warmup", 20, "unmeasured warm-up invocations per driver run under callgrind")
	fs.IntVar(&c.InstrRounds, "instr-rounds", 3, "driver runs of each path, wrapped and bare, under callgrind (client instructions against the floor)")
	fs.IntVar(&c.CompareN, "compare-n", 4000, "invocations per phase and run (Powertools comparison)")
	fs.IntVar(&c.CompareC, "compare-c", 16, "invocations in flight (Powertools comparison)")
	fs.IntVar(&c.CompareRounds, "compare-rounds", 6, "runs of each implementation, alternating (Powertools comparison)")
	fs.IntVar(&c.Warm, "warmup", 500, "unmeasured warm-up invocations per driver process")
	fs.IntVar(&c.RedisFloorN, "redis-floor-n", 2000, "invocations of each path and case (Redis floor)")
	fs.IntVar(&c.RedisFloorWarmup, "redis-floor-warmup", 200, "unmeasured warm-up invocations of each path (Redis floor)")
	fs.IntVar(&c.PGFloorN, "pg-floor-n", 2000, "invocations of each path and case (PostgreSQL floor)")
	fs.IntVar(&c.PGFloorWarmup, "pg-floor-warmup", 200, "unmeasured warm-up invocations of each path (PostgreSQL floor)")
	fs.IntVar(&c.CapacityN, "capacity-n", 300, "new keys, then their replays, per driver run (consumed capacity)")
	fs.IntVar(&c.CapacityC, "capacity-c", 4, "invocations in flight (consumed capacity)")
	fs.IntVar(&c.CapacityWarmup, "capacity-warmup", 50, "unmeasured warm-up invocations per driver run (consumed capacity)")
	fs.IntVar(&c.ScaleN, "scale-n", 10000, "invocations per scale run (distinct keys)")
	fs.IntVar(&c.ScaleN1, "scale-n1", 4000, "invocations of the scale runs at concurrency 1")
	fs.Float64Var(&c.ScaleDups, "scale-dups", 0.10, "fraction of duplicates in the second scale series")
	fs.IntVar(&c.ColdReps, "cold-reps", 40, "measured starts of each function (cold start)")
	fs.IntVar(&c.BatchRuns, "batch-runs", 5, "measured runs of each batch over DynamoDB, idemkit's and Powertools' (batches at 5 ms a call)")
	fs.IntVar(&c.BatchRunsOthers, "batch-runs-others", 3, "measured runs of each batch over Redis and PostgreSQL (batches at 5 ms a call)")
	fs.IntVar(&c.BenchCount, "bench-count", 8, "passes of the in-process benchmarks (each -test.count 1)")
	fs.StringVar(&c.Benchtime, "benchtime", "250ms", "go test -benchtime of the in-process benchmarks")
	fs.StringVar(&c.Only, "only", "", "run only these sections, e.g. 1,5 (default: all)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write this process's CPU profile to this file (to see where a section's time goes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return err
	}
	c.Root = root
	if !filepath.IsAbs(c.Build) {
		c.Build = filepath.Join(root, c.Build)
	}
	if !filepath.IsAbs(c.Out) {
		c.Out = filepath.Join(root, c.Out)
	}
	if err := os.MkdirAll(c.Build, 0o755); err != nil {
		return err
	}
	if localddb.Endpoint() == "" {
		return errors.New("AWS_ENDPOINT_URL_DYNAMODB is not set: run under scripts/with-dynamodb.sh (make bench does)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if c.runs(2) || c.runs(9) || c.runs(10) {
		if err := requireValgrind(); err != nil {
			return err
		}
	}
	instrDir := filepath.Join(c.Build, "callgrind")
	if err := os.MkdirAll(instrDir, 0o755); err != nil {
		return err
	}

	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	began := time.Now()
	progress := func(section string) func(string) {
		return func(msg string) {
			fmt.Fprintf(os.Stderr, "idembench %6.1fs  %s: %s\n", time.Since(began).Seconds(), section, msg)
		}
	}

	total := &calls{}
	client, err := newClient(ctx, 256, total)
	if err != nil {
		return err
	}
	e := &env{root: root, self: self, serverPID: listenerPID(localddb.Endpoint()), client: client}
	r := &report{cfg: c, argv: os.Args, started: began.UTC(), machine: describeMachine(root, e.serverPID)}
	rs := redisFromEnv()
	r.redisPID, r.redisURL = rs.pid, rs.url != ""
	tmpl, err := loadPaymentEvent(filepath.Join(root, "bench"))
	if err != nil {
		return err
	}

	table, err := createTable(ctx, client, "inproc")
	if err != nil {
		return err
	}
	defer deleteTable(client, table)

	section := func(name string, f func()) {
		a := snapshot(e.serverPID, rs.pid)
		f()
		r.loads = append(r.loads, loadBetween(name, a, snapshot(e.serverPID, rs.pid), runtime.NumCPU()))
	}
	r.loadStart = firstLine(readFile("/proc/loadavg"))

	// The in-process timings are the most sensitive to the machine's state,
	// so they run first, before minutes of load: on a shared VM the same test
	// binary measured up to 1.5× slower right after the other sections than
	// on a rested machine. DynamoDB Local is idle meanwhile (not yet warmed).
	if c.runs(4) {
		section("4. in-process (with its build)", func() {
			if r.inproc, err = runInproc(ctx, root, c.Build, c.BenchCount, c.Benchtime, progress("4 in-process")); err != nil {
				r.inprocErr = err.Error()
				progress("4 in-process")("FAILED: " + err.Error())
			}
		})
	}

	// §9's in-process half runs here too, for the same reason.
	r.http = &httpResult{}
	if c.runs(9) {
		section("9. net/http middleware, in process (with its build)", func() {
			if err = runHTTPInproc(ctx, root, c.Build, c.BenchCount, c.Benchtime, r.http, progress("9 net/http in-process")); err != nil {
				r.httpErr = err.Error()
				progress("9 net/http in-process")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(1) || c.runs(2) || c.runs(3) || c.runs(6) || c.runs(9) || c.runs(10) || c.runs(12) {
		section("warm-up", func() {
			progress("warm-up")("DynamoDB Local's JIT: 3,000 invocations, unmeasured")
			warmUp(ctx, client, table, tmpl, 3000)
		})
	}

	if c.runs(1) {
		section("1. calls per invocation", func() {
			progress("1 calls")(fmt.Sprintf("%d repetitions of each scenario", c.CallsReps))
			r.calls = runCalls(ctx, client, table, tmpl, c.CallsReps)
		})
	}
	if c.runs(1) || c.runs(8) {
		section("1 and 8. a handler write in the completion transaction", func() {
			r.tx = runTx(ctx, client, tmpl, c.CallsReps) // bench/tx.go
			r.calls = append(r.calls, r.tx.Calls...)
		})
	}

	if c.runs(2) {
		section("2. distance from the floor", func() {
			progress("2 floor")(fmt.Sprintf("%d runs of %d wrapped and %d bare invocations per case", c.FloorRuns, c.FloorN/c.FloorRuns, c.FloorN/c.FloorRuns))
			if r.floor, err = runFloor(ctx, client, table, tmpl, c.FloorRuns, c.FloorN, c.FloorWarmup); err == nil {
				r.floorCPU, err = runCPUPairs(ctx, e, "wrap", c, progress("2 floor"))
			}
			if err == nil {
				r.floorSelf, err = runCPUSelf(ctx, e, "wrap", c, progress("2 floor"))
			}
			if err != nil {
				r.floorErr = err.Error()
				progress("2 floor")("FAILED: " + err.Error())
				return
			}
			r.floorInstr, r.floorInstrErr = measureInstr(ctx, e, "wrap", instrDir, c, progress("2 floor"))
		})
	}

	if c.runs(9) && r.httpErr == "" {
		section("9. net/http middleware over HTTP", func() {
			if err = runHTTPLoopback(ctx, e, table, tmpl, c, r.http, progress("9 net/http")); err != nil {
				r.httpErr = err.Error()
				progress("9 net/http")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(10) {
		section("10. API Gateway", func() {
			if r.apigw, err = runAPIGW(ctx, e, table, tmpl, c, progress("10 apigateway")); err != nil {
				r.apigwErr = err.Error()
				progress("10 apigateway")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(7) {
		section("7. Redis floor", func() {
			progress("7 redis floor")(fmt.Sprintf("%d invocations of each path (wrapped, redisstore alone, bare, handler alone) per case", c.RedisFloorN))
			rc, err := newRedisClient(ctx, &calls{})
			if err == nil {
				defer rc.Close()
				r.redis = describeRedis(ctx, rc)
				r.redisFloor, err = runRedisFloor(ctx, rc, tmpl, c.RedisFloorN, c.RedisFloorWarmup)
			}
			if err != nil {
				r.redisFloorErr = err.Error()
				progress("7 redis floor")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(11) {
		section("11. PostgreSQL floor", func() {
			progress("11 postgres floor")(fmt.Sprintf("%d repetitions of each round-trips scenario; %d invocations of each path (bare, wrapped, wrapped without SQL) per case", c.CallsReps, c.PGFloorN))
			if r.pg, err = runPGFloor(ctx, tmpl, c.CallsReps, c.PGFloorN, c.PGFloorWarmup); err != nil {
				r.pgErr = err.Error()
				progress("11 postgres floor")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(12) {
		section("12. batches at 5 ms a call", func() {
			if r.batch, err = runBatchWave(ctx, e, c.Build, c.BatchRuns, c.BatchRunsOthers, progress("12 batches")); err != nil {
				r.batchErr = err.Error()
				progress("12 batches")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(8) {
		section("8. consumed capacity", func() {
			if r.capacity, err = runCapacity(ctx, e, tmpl, c.CapacityN, c.CapacityC, c.CapacityWarmup, progress("8 capacity")); err != nil {
				r.capacityErr = err.Error()
				progress("8 capacity")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(3) {
		section("3. Powertools", func() {
			if r.compare, err = runCompare(ctx, e, c.CompareN, c.CompareC, c.Warm, c.CompareRounds, progress("3 powertools")); err != nil {
				r.compareErr = err.Error()
				progress("3 powertools")("FAILED: " + err.Error())
			}
		})
	}

	levels := []int{1, 4, 16, 64}
	nOf := func(conc int) int {
		if conc == 1 {
			return c.ScaleN1
		}
		return c.ScaleN
	}
	if c.runs(6) {
		section("6. scale", func() {
			if r.scale, err = runScale(ctx, e, levels, nOf, c.ScaleDups, c.Warm, progress("6 scale")); err != nil {
				r.scaleErr = err.Error()
				progress("6 scale")("FAILED: " + err.Error())
			}
		})
	}

	if c.runs(5) {
		section("5. cold start (with its builds)", func() {
			if r.cold, err = runColdStarts(ctx, e, c.Build, c.ColdReps, progress("5 cold start")); err != nil {
				r.coldErr = err.Error()
				progress("5 cold start")("FAILED: " + err.Error())
			}
		})
	}

	r.loadEnd = firstLine(readFile("/proc/loadavg"))
	if ctx.Err() != nil {
		return ctx.Err()
	}

	r.wall = time.Since(began)
	if err := os.WriteFile(c.Out, []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	progress("done")(fmt.Sprintf("wrote %s in %s", c.Out, r.wall.Round(time.Second)))
	fmt.Fprint(os.Stderr, r.summaryText())
	var failed []string
	for _, cr := range r.calls {
		if !cr.ok() {
			failed = append(failed, cr.Scenario)
		}
	}
	for _, f := range r.redisFloor {
		if !f.callsOK() {
			failed = append(failed, "Redis "+f.Case)
		}
	}
	for _, cr := range r.http.Calls {
		if !cr.ok() {
			failed = append(failed, "net/http "+cr.Scenario)
		}
	}
	if r.apigw != nil {
		for _, cr := range r.apigw.Calls {
			if !cr.ok() {
				failed = append(failed, "API Gateway "+cr.Scenario)
			}
		}
	}
	failed = append(failed, r.pg.failed()...)
	if c.runs(11) && r.pgErr != "" {
		failed = append(failed, "PostgreSQL (not measured: "+r.pgErr+")")
	}
	failed = append(failed, r.batch.gate(batchTimesGated)...) // §12: store calls per record; its times once gated
	if c.runs(12) && r.batchErr != "" {
		failed = append(failed, "§12 batches (not measured: "+r.batchErr+")")
	}
	var missed []string
	for _, g := range r.instrGates() {
		if !g.ok {
			missed = append(missed, g.name)
		}
	}
	switch {
	case len(failed) > 0 && len(missed) > 0:
		return fmt.Errorf("calls-per-invocation target missed: %s; client-instructions ceiling missed: %s (see %s)", strings.Join(failed, ", "), strings.Join(missed, ", "), c.Out)
	case len(failed) > 0:
		return fmt.Errorf("calls-per-invocation target missed: %s (see %s)", strings.Join(failed, ", "), c.Out)
	case len(missed) > 0:
		return fmt.Errorf("client-instructions ceiling missed: %s (see %s)", strings.Join(missed, ", "), c.Out)
	}
	return nil
}

// warmUp runs n new keys and their replays through the wrapper at
// concurrency 16, so DynamoDB Local's JIT has compiled its hot paths before
// anything is measured.
func warmUp(ctx context.Context, client dynamostore.Client, table string, tmpl paymentEvent, n int) {
	engine := idempotent.New(dynamostore.New(client, table),
		idempotent.WithPrefix("warmup"), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	h := idempotent.Wrap(engine, chargeHandler, idempotent.WithKey(eventKey))
	keys := make([]string, n)
	run := randomHex(6)
	for i := range keys {
		keys[i] = fmt.Sprintf("warm-%s-%d", run, i)
	}
	runPhase(ctx, h, tmpl, keys, 16)
	runPhase(ctx, h, tmpl, keys, 16)
}
