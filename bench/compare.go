package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// env is what the children need to know about this run.
type env struct {
	root      string // the repository
	self      string // this executable, for "drive" children
	serverPID int    // DynamoDB Local's pid, 0 if unknown
	client    *dynamodb.Client
}

// driver runs one child (the Go driver or the Powertools script) on a table
// of its own and returns its phases.
func (e *env) driver(ctx context.Context, impl string, args ...string) ([]phaseResult, error) {
	return e.driverThen(ctx, impl, nil, args...)
}

// driverThen is driver, and then, before the table is deleted, calls after
// with it (when after is not nil).
func (e *env) driverThen(ctx context.Context, impl string, after func(ctx context.Context, table string) error, args ...string) ([]phaseResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a run takes seconds; never hang make bench
	defer cancel()
	table, err := createTable(ctx, e.client, impl)
	if err != nil {
		return nil, err
	}
	defer deleteTable(e.client, table)
	args = append(args, "-table", table, "-server-pid", strconv.Itoa(e.serverPID),
		"-event", filepath.Join(e.root, "bench", "testdata", "payment-event.json"))
	var cmd *exec.Cmd
	switch impl {
	case "idemkit":
		cmd = exec.CommandContext(ctx, e.self, append([]string{"drive"}, args...)...)
	case "powertools":
		for i, a := range args { // node's parseArgs wants --long options
			if strings.HasPrefix(a, "-") {
				args[i] = "-" + a
			}
		}
		cmd = exec.CommandContext(ctx, "node", append([]string{filepath.Join(e.root, "bench", "powertools", "bench.mjs")}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	default:
		return nil, fmt.Errorf("unknown implementation %q", impl)
	}
	cmd.Dir = e.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s driver: %w\n%s", impl, err, stderr.String())
	}
	var out []phaseResult
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r phaseResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s driver: bad output %q: %w", impl, sc.Text(), err)
		}
		if r.Errors > 0 {
			return nil, fmt.Errorf("%s driver: %d unexpected errors in phase %s, the first: %s", impl, r.Errors, r.Phase, r.FirstError)
		}
		out = append(out, r)
	}
	if after != nil {
		if err := after(ctx, table); err != nil {
			return out, err
		}
	}
	return out, nil
}

// compareResult holds the runs of the side-by-side comparison.
type compareResult struct {
	N, Concurrency, Rounds int
	Runs                   map[string][]phaseResult // by impl+"/"+phase
}

func (c compareResult) metric(impl, phase string, f func(phaseResult) float64) spread {
	var v []float64
	for _, r := range c.Runs[impl+"/"+phase] {
		v = append(v, f(r))
	}
	return spreadOf(v)
}

// pairedRatio is the median over rounds of f(idemkit)/f(Powertools) within
// each round: the two ran back to back, so a round's ratio is less exposed
// to the machine's changing load than the ratio of the medians.
func (c compareResult) pairedRatio(phase string, f func(phaseResult) float64) spread {
	a, b := c.Runs["idemkit/"+phase], c.Runs["powertools/"+phase]
	var v []float64
	for i := range min(len(a), len(b)) {
		if d := f(b[i]); d != 0 {
			v = append(v, f(a[i])/d)
		}
	}
	return spreadOf(v)
}

// runCompare runs the Go driver and the Powertools script rounds times each,
// alternating which goes first, each with new keys and then their replays.
func runCompare(ctx context.Context, e *env, n, conc, warmup, rounds int, progress func(string)) (compareResult, error) {
	res := compareResult{N: n, Concurrency: conc, Rounds: rounds, Runs: map[string][]phaseResult{}}
	for round := range rounds {
		order := []string{"idemkit", "powertools"}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, impl := range order {
			progress(fmt.Sprintf("round %d/%d: %s", round+1, rounds, impl))
			phases, err := e.driver(ctx, impl, "-n", strconv.Itoa(n), "-c", strconv.Itoa(conc),
				"-warmup", strconv.Itoa(warmup), "-phases", "new,replay")
			if err != nil {
				return res, err
			}
			for _, p := range phases {
				res.Runs[impl+"/"+p.Phase] = append(res.Runs[impl+"/"+p.Phase], p)
			}
		}
	}
	return res, nil
}
