package batch

// NotDone returns the indexes of the records that are not done, in batch
// order: what a queue must deliver again when each record is reported on
// its own (SQS).
func NotDone(results []Result) []int {
	var out []int
	for i, r := range results {
		if r.Status != Done {
			out = append(out, i)
		}
	}
	return out
}

// Checkpoints returns, for each checkpoint unit (a shard, a partition), the
// index of its first record that is not done, in batch order: what a
// consumer that checkpoints must be told. The unit's records before it are
// done; it and every later record of the unit are delivered again (the later
// ones that are done are then replayed, not run again).
func Checkpoints(results []Result, unit func(i int) string) []int {
	var out []int
	seen := make(map[string]bool)
	for i, r := range results {
		if r.Status == Done {
			continue
		}
		u := unit(i)
		if seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, i)
	}
	return out
}
