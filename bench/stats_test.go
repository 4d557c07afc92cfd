package main

import "testing"

func TestMedianCIRank(t *testing.T) {
	for _, c := range []struct{ n, k int }{{3, 0}, {5, 0}, {6, 1}, {10, 2}, {20, 6}, {30, 10}} {
		if got := medianCIRank(c.n); got != c.k {
			t.Errorf("medianCIRank(%d) = %d, want %d", c.n, got, c.k)
		}
	}
}

func TestSpread(t *testing.T) {
	s := spreadOf([]float64{5, 1, 3})
	if s.Median != 3 || s.Lo != 1 || s.Hi != 5 || s.pm() != " ± 67%" {
		t.Errorf("spreadOf = %+v %q", s, s.pm())
	}
	if q := quantile([]float64{1, 2, 3, 4}, 0.5); q != 2 {
		t.Errorf("quantile = %v", q)
	}
}
