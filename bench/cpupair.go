package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuPairs is a front door's client CPU against its floor's: the Go driver
// (idembench drive) run with the door and with its bare path, each in a
// process of its own, so each process's CPU time (getrusage) is that path's
// alone: the SDK's, the handler's and, for the wrapped path, idemkit's. The
// two run at the same time, each phase started in both at once (-sync), so
// both meet the same load from the rest of the machine (on a shared 2-core
// machine, CPU time per invocation drifts by tens of percent from one
// minute to the next); the gate is the median of several rounds' ratios.
type cpuPairs struct {
	Door                 string
	N, Concurrency, Warm int
	Runs                 map[string][]phaseResult // by "wrapped/new", "bare/replay", ...
}

// ratio is the median over rounds of wrapped / bare client CPU per
// invocation, in phase.
func (p cpuPairs) ratio(phase string) spread {
	w, b := p.Runs["wrapped/"+phase], p.Runs["bare/"+phase]
	var v []float64
	for i := range min(len(w), len(b)) {
		if d := b[i].cpuUsPerInv(); d > 0 {
			v = append(v, w[i].cpuUsPerInv()/d)
		}
	}
	return spreadOf(v)
}

// cpu is one path's client CPU per invocation, in µs, over the rounds.
func (p cpuPairs) cpu(path, phase string) spread {
	var v []float64
	for _, r := range p.Runs[path+"/"+phase] {
		v = append(v, r.cpuUsPerInv())
	}
	return spreadOf(v)
}

// calls is one path's DynamoDB calls per invocation, over the rounds.
func (p cpuPairs) calls(path, phase string) spread {
	var v []float64
	for _, r := range p.Runs[path+"/"+phase] {
		v = append(v, r.callsPerInv())
	}
	return spreadOf(v)
}

// userSys is one path's user and system CPU per invocation, in µs: the
// medians over the rounds.
func (p cpuPairs) userSys(path, phase string) (user, sys float64) {
	var u, k []float64
	for _, r := range p.Runs[path+"/"+phase] {
		u = append(u, r.CPUUser*1e6/float64(r.N))
		k = append(k, r.CPUSys*1e6/float64(r.N))
	}
	return spreadOf(u).Median, spreadOf(k).Median
}

// allocKB is one path's Go heap allocation per invocation, in KB (1,000
// bytes), over the rounds: the SDK's, the handler's and idemkit's.
func (p cpuPairs) allocKB(path, phase string) spread {
	var v []float64
	for _, r := range p.Runs[path+"/"+phase] {
		v = append(v, float64(r.AllocBytes)/float64(r.N)/1000)
	}
	return spreadOf(v)
}

// runCPUPairs runs door's driver, wrapped and bare side by side, c.CPURounds
// times, each with new keys and then their replays.
func runCPUPairs(ctx context.Context, e *env, door string, c config, progress func(string)) (cpuPairs, error) {
	res := cpuPairs{Door: door, N: c.CPUN, Concurrency: c.CPUC, Warm: c.CPUWarmup, Runs: map[string][]phaseResult{}}
	args := cpuArgs(door, c)
	for round := range c.CPURounds {
		progress(fmt.Sprintf("client CPU, round %d/%d: %s, wrapped and bare side by side, %d new keys and their replays, %d in flight each",
			round+1, c.CPURounds, door, c.CPUN, c.CPUC))
		// Every other round starts the bare driver first, so neither path
		// always comes first (its process, its table, its "go").
		pair := [2][]string{slices.Concat(args, []string{"-bare=false"}), slices.Concat(args, []string{"-bare=true"})}
		if round%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		out, err := e.drivePair(ctx, pair)
		if err != nil {
			return res, err
		}
		for _, phases := range out {
			for _, p := range phases {
				path := "wrapped"
				if p.Bare {
					path = "bare"
				}
				res.Runs[path+"/"+p.Phase] = append(res.Runs[path+"/"+p.Phase], p)
			}
		}
	}
	return res, nil
}

// cpuArgs are the driver's arguments for door's client CPU runs.
func cpuArgs(door string, c config) []string {
	return []string{"-door", door, "-n", strconv.Itoa(c.CPUN), "-c", strconv.Itoa(c.CPUC),
		"-warmup", strconv.Itoa(c.CPUWarmup), "-phases", "new,replay", "-sync"}
}

// runCPUSelf runs door's wrapped driver against itself, side by side as
// runCPUPairs runs wrapped against bare, c.CPUSelfRounds times, and returns
// each round's ratio by phase ("new", "replay"), the path in the first slot
// over the other, the slots taking turns. The true ratio is 1: how far the
// rounds stray from it is how finely the pairs resolve a ratio on this
// machine.
func runCPUSelf(ctx context.Context, e *env, door string, c config, progress func(string)) (map[string][]float64, error) {
	args := slices.Concat(cpuArgs(door, c), []string{"-bare=false"})
	ratios := map[string][]float64{}
	for round := range c.CPUSelfRounds {
		progress(fmt.Sprintf("client CPU, resolution round %d/%d: %s wrapped against itself, side by side",
			round+1, c.CPUSelfRounds, door))
		out, err := e.drivePair(ctx, [2][]string{args, args})
		if err != nil {
			return ratios, err
		}
		a, b := out[0], out[1]
		if round%2 == 1 {
			a, b = b, a
		}
		for i := range min(len(a), len(b)) {
			if d := b[i].cpuUsPerInv(); d > 0 && a[i].Phase == b[i].Phase {
				ratios[a[i].Phase] = append(ratios[a[i].Phase], a[i].cpuUsPerInv()/d)
			}
		}
	}
	return ratios, nil
}

// drivePair runs two Go drivers with -sync, each on a table of its own,
// and starts each of their phases at once: when both have said "ready".
func (e *env) drivePair(ctx context.Context, args [2][]string) ([2][]phaseResult, error) {
	var out [2][]phaseResult
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a run takes seconds; never hang make bench
	defer cancel()
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		lines  chan string // stdout, line by line; closed at its end
		stderr strings.Builder
		waited bool
	}
	var kids [2]*child
	defer func() {
		for _, k := range kids {
			if k != nil && !k.waited {
				_ = k.cmd.Process.Kill()
				_ = k.cmd.Wait()
			}
		}
	}()
	for i := range kids {
		table, err := createTable(ctx, e.client, "cpu")
		if err != nil {
			return out, err
		}
		defer deleteTable(e.client, table)
		a := append(append([]string{"drive"}, args[i]...), "-table", table,
			"-event", filepath.Join(e.root, "bench", "testdata", "payment-event.json"))
		k := &child{cmd: exec.CommandContext(ctx, e.self, a...), lines: make(chan string, 16)}
		k.cmd.Dir = e.root
		k.cmd.Stderr = &k.stderr
		if k.stdin, err = k.cmd.StdinPipe(); err != nil {
			return out, err
		}
		stdout, err := k.cmd.StdoutPipe()
		if err != nil {
			return out, err
		}
		if err := k.cmd.Start(); err != nil {
			return out, err
		}
		kids[i] = k
		go func() {
			defer close(k.lines)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				k.lines <- sc.Text()
			}
		}()
	}
	// Each child prints "ready" before each phase and a JSON line after it;
	// at its end, its stdout closes.
	for {
		var ready int
		for i, k := range kids {
			line, ok := <-k.lines
			for ok && line != "ready" {
				var r phaseResult
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					return out, fmt.Errorf("driver: bad output %q: %w", line, err)
				}
				if r.Errors > 0 {
					return out, fmt.Errorf("driver: %d unexpected errors in phase %s, the first: %s", r.Errors, r.Phase, r.FirstError)
				}
				out[i] = append(out[i], r)
				line, ok = <-k.lines
			}
			if ok {
				ready++
			}
		}
		switch ready {
		case 0:
			for i, k := range kids {
				if err := k.cmd.Wait(); err != nil {
					return out, fmt.Errorf("driver %d: %w\n%s", i, err, k.stderr.String())
				}
				k.waited = true
			}
			return out, nil
		case len(kids):
			for _, k := range kids {
				if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
					return out, err
				}
			}
		default:
			return out, fmt.Errorf("drivers out of step: one ended, the other waits for a phase\n%s\n%s", kids[0].stderr.String(), kids[1].stderr.String())
		}
	}
}
