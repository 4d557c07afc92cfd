package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// phaseResult is what a driver (this Go one or powertools/bench.mjs) prints,
// one JSON line per measured phase. Both print the same fields.
type phaseResult struct {
	Impl        string         `json:"impl"`
	Door        string         `json:"door,omitempty"` // the Go driver's -door
	Bare        bool           `json:"bare,omitempty"` // the Go driver's -bare
	Phase       string         `json:"phase"`
	Concurrency int            `json:"concurrency"`
	N           int            `json:"n"`
	Seconds     float64        `json:"seconds"`
	Latency     latencies      `json:"latency"`
	Ops         int64          `json:"ops"`      // DynamoDB API calls
	Attempts    int64          `json:"attempts"` // HTTP requests (ops + SDK retries)
	CPUUser     float64        `json:"cpu_user_s"`
	CPUSys      float64        `json:"cpu_sys_s"`
	ServerCPU   float64        `json:"server_cpu_s"` // DynamoDB Local's CPU time in the phase, -1 if unknown
	Outcomes    map[string]int `json:"outcomes"`
	// Capacity is the consumed capacity by operation (-capacity only).
	Capacity map[string]*opCapacity `json:"capacity,omitempty"`
	Errors   int                    `json:"errors"` // unexpected errors
	// AllocBytes, Mallocs and GCs are the Go driver's heap allocations and
	// collections in the phase (runtime.MemStats), 0 from other drivers.
	AllocBytes uint64 `json:"alloc_bytes,omitempty"`
	Mallocs    uint64 `json:"mallocs,omitempty"`
	GCs        uint32 `json:"gcs,omitempty"`
	// Syscalls and bytes the Go driver read and wrote in the phase
	// (/proc/self/io: every socket read and write, the SDK's to DynamoDB).
	ReadCalls  int64  `json:"syscr,omitempty"`
	WriteCalls int64  `json:"syscw,omitempty"`
	ReadBytes  int64  `json:"rchar,omitempty"`
	WriteBytes int64  `json:"wchar,omitempty"`
	FirstError string `json:"first_error,omitempty"`
}

func (r phaseResult) throughput() float64    { return float64(r.N) / r.Seconds }
func (r phaseResult) callsPerInv() float64   { return float64(r.Ops) / float64(r.N) }
func (r phaseResult) cpuPer1000() float64    { return (r.CPUUser + r.CPUSys) * 1000 / float64(r.N) }
func (r phaseResult) cpuUsPerInv() float64   { return (r.CPUUser + r.CPUSys) * 1e6 / float64(r.N) }
func (r phaseResult) serverPer1000() float64 { return r.ServerCPU * 1000 / float64(r.N) }

// driveMain is the "drive" subcommand: the idemkit side of the throughput
// comparison and the scale runs, in a process of its own so its CPU time is
// its own. Phases:
//
//	new     N invocations of fresh keys
//	replay  the same N keys again (every one a duplicate of a completed record)
//	mixed   N invocations of which a fraction -dups repeat a recent key
//
// A warm-up of -warmup fresh keys and their replays runs first, unmeasured.
func driveMain(args []string) error {
	fs := flag.NewFlagSet("drive", flag.ContinueOnError)
	table := fs.String("table", "", "idempotency table")
	n := fs.Int("n", 2000, "invocations per phase")
	conc := fs.Int("c", 16, "invocations in flight")
	warmup := fs.Int("warmup", 500, "unmeasured warm-up invocations (fresh keys, then their replays)")
	phases := fs.String("phases", "new,replay", "comma-separated phases: new, replay, mixed")
	dups := fs.Float64("dups", 0, "mixed phase: fraction of invocations that repeat a recent key")
	eventFile := fs.String("event", "bench/testdata/payment-event.json", "event template")
	serverPID := fs.Int("server-pid", 0, "DynamoDB Local's pid, to report its CPU time (0: unknown)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured phases to this file")
	capacity := fs.Bool("capacity", false, "ask for ReturnConsumedCapacity=TOTAL on every call and report it per phase")
	pad := fs.Int("pad", 0, "add a receipt field of this many characters to every response")
	ctype := fs.String("ctype", "application/json", "-door http: the requests' Content-Type (application/octet-stream: the body is fingerprinted as given, not canonically)")
	doorName := fs.String("door", "wrap", "the front door: wrap (idempotent.Wrap), http (nethttp.Middleware, ServeHTTP called in process), apigw (apigateway.WrapV2)")
	syncPhases := fs.Bool("sync", false, "before each measured phase, print a line \"ready\" and wait for a line on stdin (the parent starts two drivers' phases at once)")
	bareRun := fs.Bool("bare", false, "run the door's floor (its bare path: the same store calls made by hand) instead of the door")
	underCallgrind := fs.Bool("callgrind", false, "the driver runs under valgrind's callgrind (instr.go): collect the garbage before each measured phase, so that each starts from the same heap")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *table == "" {
		return errors.New("drive: -table is required")
	}
	b, err := os.ReadFile(*eventFile)
	if err != nil {
		return err
	}
	var tmpl paymentEvent
	if err := json.Unmarshal(b, &tmpl); err != nil {
		return err
	}

	ctx := context.Background()
	total := &calls{}
	var extra []func(*middleware.Stack) error
	capLog := newCapacityLog()
	if *capacity {
		extra = append(extra, returnConsumedCapacity(capLog))
	}
	client, err := newClient(ctx, max(*conc, 16)*2, total, extra...)
	if err != nil {
		return err
	}
	// Outcomes are counted with one atomic add each: the hook's cost is the
	// harness's, not idemkit's, and it runs on every wrapped invocation.
	var outcomes [32]atomic.Int64
	engine := idempotent.New(dynamostore.New(client, *table),
		idempotent.WithPrefix("bench"),
		idempotent.WithExpiry(time.Hour),
		idempotent.WithLogger(slog.New(slog.DiscardHandler)),
		idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
			outcomes[int(ev.Outcome)%len(outcomes)].Add(1)
		}))
	takeOutcomes := func() map[string]int {
		m := map[string]int{}
		for i := range outcomes {
			if n := outcomes[i].Swap(0); n > 0 {
				m[idempotent.Outcome(i).String()] = int(n)
			}
		}
		return m
	}
	d, err := newDriveDoor(*doorName, *bareRun, client, *table, engine, tmpl, *pad, *ctype)
	if err != nil {
		return err
	}
	h := d.invoke

	run := "g" + randomHex(6)
	keys := func(phase string, count int) []string {
		k := make([]string, count)
		for i := range k {
			k[i] = run + "-" + phase + "-" + strconv.Itoa(i)
		}
		return k
	}
	warm := keys("warmup", *warmup)
	if err := d.prepare(warm); err != nil {
		return err
	}
	runPhase(ctx, h, tmpl, warm, *conc)
	runPhase(ctx, h, tmpl, warm, *conc)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var fresh []string
	enc := json.NewEncoder(os.Stdout)
	stdin := bufio.NewReader(os.Stdin)
	for _, phase := range strings.Split(*phases, ",") {
		var ks []string
		switch phase {
		case "new":
			fresh = keys("new", *n)
			ks = fresh
		case "replay":
			if fresh == nil {
				return errors.New("drive: phase replay needs phase new before it")
			}
			ks = fresh
		case "mixed":
			ks = mixedKeys(keys("mixed", *n), *dups, *conc)
		default:
			return fmt.Errorf("drive: unknown phase %q", phase)
		}
		if err := d.prepare(ks); err != nil {
			return err
		}
		if *syncPhases {
			if _, err := fmt.Println("ready"); err != nil {
				return err
			}
			if _, err := stdin.ReadString('\n'); err != nil {
				return fmt.Errorf("drive: waiting for the phase to start: %w", err)
			}
		}
		takeOutcomes()
		capLog.take()
		ops0, att0 := total.ops.Load(), total.attempts.Load()
		srv0 := serverCPU(*serverPID)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		io0 := procIO()
		if *underCallgrind {
			runtime.GC()
		}
		ru0 := rusage()
		start := time.Now()
		callgrindZero()
		lat, errs := runPhase(ctx, h, tmpl, ks, *conc)
		callgrindDump()
		elapsed := time.Since(start)
		ru1 := rusage()
		runtime.ReadMemStats(&ms1)
		io1 := procIO()
		srv1 := serverCPU(*serverPID)
		res := phaseResult{
			Impl: "idemkit", Door: *doorName, Bare: *bareRun, Phase: phase, Concurrency: *conc, N: len(ks),
			Seconds:    elapsed.Seconds(),
			Latency:    summarize(lat),
			Ops:        total.ops.Load() - ops0,
			Attempts:   total.attempts.Load() - att0,
			CPUUser:    tvSeconds(ru1.Utime) - tvSeconds(ru0.Utime),
			CPUSys:     tvSeconds(ru1.Stime) - tvSeconds(ru0.Stime),
			Errors:     int(errs.n.Load()),
			AllocBytes: ms1.TotalAlloc - ms0.TotalAlloc,
			Mallocs:    ms1.Mallocs - ms0.Mallocs,
			GCs:        ms1.NumGC - ms0.NumGC,
			ReadCalls:  io1["syscr"] - io0["syscr"],
			WriteCalls: io1["syscw"] - io0["syscw"],
			ReadBytes:  io1["rchar"] - io0["rchar"],
			WriteBytes: io1["wchar"] - io0["wchar"],
		}
		res.ServerCPU = -1
		if srv0 >= 0 && srv1 >= 0 {
			res.ServerCPU = srv1 - srv0
		}
		if e := errs.first.Load(); e != nil {
			res.FirstError = (*e).Error()
		}
		res.Outcomes = takeOutcomes()
		if *capacity {
			res.Capacity = capLog.take()
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// callgrindZero and callgrindDump mark a measured phase's start and end
// for callgrind: instr.go runs the driver with --zero-before and
// --dump-before on them, so each dump holds the instructions of exactly one
// phase, every thread's, and none of start-up, warm-up or the harness's own
// bookkeeping around the phase. Outside valgrind they cost a call each.
//
//go:noinline
func callgrindZero() {}

//go:noinline
func callgrindDump() {}

// mixedKeys turns fresh into a sequence in which a fraction dups of the
// invocations repeat one of the last 2×conc keys sent, so some duplicates meet
// a completed record and some one still in progress. The seed is fixed.
func mixedKeys(fresh []string, dups float64, conc int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, 0, len(fresh))
	next := 0
	for len(out) < len(fresh) {
		if next > 0 && r.Float64() < dups {
			back := r.IntN(min(next, 2*conc))
			out = append(out, fresh[next-1-back])
			continue
		}
		out = append(out, fresh[next])
		next++
	}
	return out
}

type firstErrors struct {
	n     atomic.Int64
	first atomic.Pointer[error]
}

// runPhase sends one invocation per key with conc in flight, each under a
// context with a 30 s deadline (as Lambda gives), and returns the latencies.
// ErrInProgress is an expected outcome of duplicates, not an error.
func runPhase(ctx context.Context, h func(context.Context, paymentEvent) (paymentResult, error), tmpl paymentEvent, keys []string, conc int) ([]time.Duration, *firstErrors) {
	lat := make([]time.Duration, len(keys))
	errs := &firstErrors{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				ev := tmpl
				ev.IdempotencyKey = keys[i]
				t0 := time.Now()
				ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := h(ictx, ev)
				cancel()
				lat[i] = time.Since(t0)
				if err != nil && !errors.Is(err, idempotent.ErrInProgress) {
					if errs.n.Add(1) == 1 {
						errs.first.Store(&err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return lat, errs
}

// procIO is this process's I/O counters from /proc/self/io (empty where
// there is none).
func procIO() map[string]int64 {
	m := map[string]int64{}
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			m[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

func rusage() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// driveDoor is what the driver sends its invocations through: invoke runs
// one, for its event's key; prepare builds, before a phase is measured,
// what the door's invocations of keys are sent (so that the phase's CPU
// time is the door's and the store's, not that of building requests).
type driveDoor struct {
	prepare func(keys []string) error
	invoke  func(context.Context, paymentEvent) (paymentResult, error)
}

// newDriveDoor returns the door named name (see drive's -door), or its
// floor when bare is set.
func newDriveDoor(name string, bareRun bool, client *dynamodb.Client, table string, engine *idempotent.Engine, tmpl paymentEvent, pad int, ctype string) (driveDoor, error) {
	none := func([]string) error { return nil }
	floor := &bare{client: client, table: table, prefix: "bench"} // the engine's prefix
	switch name {
	case "wrap":
		if bareRun {
			if pad > 0 {
				return driveDoor{}, errors.New("drive: -pad is not for -bare")
			}
			return driveDoor{prepare: none, invoke: func(ctx context.Context, e paymentEvent) (paymentResult, error) {
				return paymentResult{}, floor.invoke(ctx, e)
			}}, nil
		}
		return driveDoor{prepare: none, invoke: idempotent.Wrap(engine, paddedCharge(pad), idempotent.WithKey(eventKey))}, nil
	case "http":
		hb := &httpBench{floor: floor, held: map[string]chan struct{}{}, started: map[string]chan struct{}{}}
		var h http.Handler = http.HandlerFunc(hb.bare)
		if !bareRun {
			h = nethttp.Middleware(engine)(http.HandlerFunc(hb.charge))
		}
		bodies := map[string][]byte{}
		return driveDoor{
			prepare: func(keys []string) error {
				clear(bodies)
				for _, k := range keys {
					e := tmpl
					e.IdempotencyKey = k
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					bodies[k] = b
				}
				return nil
			},
			invoke: func(ctx context.Context, e paymentEvent) (paymentResult, error) {
				r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://bench.invalid/payments", bytes.NewReader(bodies[e.IdempotencyKey]))
				if err != nil {
					return paymentResult{}, err
				}
				r.Header.Set("Content-Type", ctype)
				r.Header.Set(nethttp.HeaderIdempotencyKey, e.IdempotencyKey)
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, r)
				if w.status != http.StatusCreated {
					return paymentResult{}, fmt.Errorf("status %d", w.status)
				}
				return paymentResult{}, nil
			},
		}, nil
	case "apigw":
		d, err := newAPIGWDoor(".", client, table, engine, tmpl)
		if err != nil {
			return driveDoor{}, err
		}
		d.floor.prefix = floor.prefix
		h := d.wrapped
		if bareRun {
			h = d.bareHandler
		}
		evs := map[string]events.APIGatewayV2HTTPRequest{}
		return driveDoor{
			prepare: func(keys []string) error {
				clear(evs)
				for _, k := range keys {
					ev, err := d.event(k)
					if err != nil {
						return err
					}
					evs[k] = ev
				}
				return nil
			},
			invoke: func(ctx context.Context, e paymentEvent) (paymentResult, error) {
				out, err := h(ctx, evs[e.IdempotencyKey])
				if err == nil && out.StatusCode != http.StatusCreated {
					err = fmt.Errorf("status %d", out.StatusCode)
				}
				return paymentResult{}, err
			},
		}, nil
	}
	return driveDoor{}, fmt.Errorf("drive: unknown -door %q", name)
}

// discardWriter is an http.ResponseWriter that keeps the status only, as
// the Lambda runtime's or net/http's would after sending.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
