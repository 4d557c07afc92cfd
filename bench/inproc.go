package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// benchstat is pinned: golang.org/x/perf has no releases, so a pseudo-version.
const benchstat = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// inprocResult is the in-process benchmarks' output.
type inprocResult struct {
	Command   string
	Raw       string              // the go test output
	Benchstat string              // benchstat's summary of Raw
	Medians   map[string]benchFig // by benchmark name without the -GOMAXPROCS suffix
}

type benchFig struct{ NsOp, BOp, AllocsOp float64 }

// runInproc compiles the core's test binary, runs its benchmarks count times
// and summarizes them with benchstat. Absolute times differ from machine to
// machine: they are reported, not judged (issue 23's ceiling on them is a
// ratio against older code, measured by benchstat of both on one machine).
func runInproc(ctx context.Context, root, buildDir string, count int, benchtime string, progress func(string)) (*inprocResult, error) {
	bin := filepath.Join(buildDir, "idempotent.test")
	progress("compile the idempotent test binary")
	if b, err := goCmd(ctx, root, "test", "-c", "-o", bin, "./idempotent").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c: %w\n%s", err, b)
	}
	// count passes of the whole suite rather than -test.count: a burst of
	// load from elsewhere on the machine then spreads over all benchmarks
	// as a little noise, instead of spoiling every sample of one.
	args := []string{"-test.run", "^$", "-test.bench", ".", "-test.benchmem", "-test.count", "1", "-test.benchtime", benchtime}
	pkgDir := filepath.Join(root, "idempotent")
	res := &inprocResult{Command: fmt.Sprintf("go test -c -o %s ./idempotent && cd idempotent && for i in $(seq %d); do %s %s; done",
		rel(root, bin), count, rel(pkgDir, bin), strings.Join(quoteAll(args), " "))}
	progress("run " + res.Command)
	var out []byte
	for i := range count {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = pkgDir
		pass, err := cmd.CombinedOutput()
		if err != nil {
			res.Raw = string(pass)
			return res, fmt.Errorf("benchmarks, pass %d: %w\n%s", i+1, err, pass)
		}
		out = append(out, benchLines(pass, i == 0)...) // one header (goos, goarch, pkg, cpu) is enough
	}
	res.Raw = string(out)
	if err := os.WriteFile(filepath.Join(buildDir, "idempotent.txt"), out, 0o644); err != nil {
		return res, err
	}
	progress("go run " + benchstat)
	var stderr strings.Builder
	bsCmd := goCmd(ctx, buildDir, "run", benchstat, "idempotent.txt")
	bsCmd.Stderr = &stderr // "go: downloading ..." on the first run
	bs, err := bsCmd.Output()
	if err != nil {
		return res, fmt.Errorf("benchstat: %w\n%s", err, stderr.String())
	}
	res.Benchstat = string(bs)
	res.Medians = parseBench(res.Raw)

	return res, nil
}

func goCmd(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	return cmd
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " $^*") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

// parseBench reads go test -bench output into per-benchmark medians.
func parseBench(out string) map[string]benchFig {
	samples := map[string][][3]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		var v [3]float64
		for i := 2; i+1 < len(f); i += 2 {
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				v[0] = x
			case "B/op":
				v[1] = x
			case "allocs/op":
				v[2] = x
			}
		}
		samples[name] = append(samples[name], v)
	}
	out2 := map[string]benchFig{}
	for name, ss := range samples {
		var ns, b, a []float64
		for _, s := range ss {
			ns, b, a = append(ns, s[0]), append(b, s[1]), append(a, s[2])
		}
		out2[name] = benchFig{NsOp: spreadOf(ns).Median, BOp: spreadOf(b).Median, AllocsOp: spreadOf(a).Median}
	}
	return out2
}

// benchLines keeps the benchmark lines of a go test -bench output, and its
// configuration lines (goos: linux, ...) if header is set.
func benchLines(out []byte, header bool) []byte {
	var keep []string
	for _, line := range strings.SplitAfter(string(out), "\n") {
		k, _, isConfig := strings.Cut(line, ": ")
		if strings.HasPrefix(line, "Benchmark") || (header && isConfig && !strings.Contains(k, " ")) {
			keep = append(keep, line)
		}
	}
	return []byte(strings.Join(keep, ""))
}
