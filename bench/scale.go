package main

import (
	"context"
	"fmt"
	"strconv"
)

// scaleRun is one concurrency level of the scale runs.
type scaleRun struct {
	Concurrency int
	Dups        float64
	Result      phaseResult
}

// runScale runs the Go driver at each concurrency, first over distinct keys,
// then with a fraction dups of duplicates. n(c) is the number of invocations
// at concurrency c.
func runScale(ctx context.Context, e *env, levels []int, n func(c int) int, dups float64, warmup int, progress func(string)) ([]scaleRun, error) {
	var out []scaleRun
	for _, d := range []float64{0, dups} {
		for _, c := range levels {
			progress(fmt.Sprintf("concurrency %d, %.0f%% duplicates, %d invocations", c, 100*d, n(c)))
			phases, err := e.driver(ctx, "idemkit", "-n", strconv.Itoa(n(c)), "-c", strconv.Itoa(c),
				"-warmup", strconv.Itoa(warmup), "-phases", "mixed", "-dups", strconv.FormatFloat(d, 'f', -1, 64))
			if err != nil {
				return out, err
			}
			out = append(out, scaleRun{Concurrency: c, Dups: d, Result: phases[0]})
		}
	}
	return out, nil
}
