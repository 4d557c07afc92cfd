package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// quantile returns the q-quantile (0..1) of sorted by the nearest-rank method.
func quantile[T int64 | float64 | time.Duration](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencies summarizes per-invocation latencies.
type latencies struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_us"`
	P90 float64 `json:"p90_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

func summarize(d []time.Duration) latencies {
	s := slices.Clone(d)
	slices.Sort(s)
	us := func(v time.Duration) float64 { return float64(v) / float64(time.Microsecond) }
	return latencies{N: len(s), P50: us(quantile(s, 0.50)), P90: us(quantile(s, 0.90)), P99: us(quantile(s, 0.99)), Max: us(quantile(s, 1))}
}

// spread is a figure measured in several runs: its median and, as benchstat
// gives it, a distribution-free 95% confidence interval of the median (from
// the order statistics; with fewer than 6 runs there is none, and the range
// is kept instead).
type spread struct {
	Median, Lo, Hi float64
	Runs           int
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	sp := spread{Median: m, Lo: s[0], Hi: s[n-1], Runs: n}
	if k := medianCIRank(n); k > 0 {
		sp.Lo, sp.Hi = s[k-1], s[n-k]
	}
	return sp
}

// medianCIRank returns the largest k with P(Binomial(n, 1/2) < k) <= 2.5%:
// [x(k), x(n-k+1)] then covers the median with at least 95% confidence. It
// returns 0 when n is too small for such an interval (n < 6).
func medianCIRank(n int) int {
	k, cdf := 0, 0.0
	for i := 0; i <= n; i++ {
		p := binomialHalf(n, i)
		if cdf+p > 0.025 {
			break
		}
		cdf += p
		k = i + 1
	}
	return k
}

func binomialHalf(n, i int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	return math.Exp(lg(n) - lg(i) - lg(n-i) - float64(n)*math.Ln2)
}

// pm is the variation as benchstat prints it: "± 3%", the larger distance
// from the median to the ends of the interval, relative to the median.
func (s spread) pm() string {
	if s.Runs < 2 || s.Median == 0 {
		return ""
	}
	return fmt.Sprintf(" ± %.0f%%", 100*max(s.Hi-s.Median, s.Median-s.Lo)/math.Abs(s.Median))
}

// format prints the median with the given format, then the variation.
func (s spread) format(f string) string { return fmt.Sprintf(f, s.Median) + s.pm() }
