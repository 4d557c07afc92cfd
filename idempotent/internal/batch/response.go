package batch

import (
	"fmt"
	"strconv"
	"strings"
)

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

// WholeBatch is the answer of a source without partial batch responses
// (Amazon MQ): when a record is not done the function fails, and the broker
// delivers the whole batch again, whose done records then replay from their
// records. It holds the IDs of the records not done and whether one of them
// failed for want of the default key.
type WholeBatch struct {
	// IDs are the records' IDs, in processing order ("" for none).
	IDs []string
	// NoID: a record failed without an ID under the default key.
	NoID bool
}

// NotDoneBatch returns the records not done as a WholeBatch, or nil when
// every one is done. id gives a record's ID; defaultKey says whether the
// default key (the ID) was in use, so that a record without an ID failed for
// the lack of one.
func NotDoneBatch(results []Result, id func(i int) string, defaultKey bool) *WholeBatch {
	notDone := NotDone(results)
	if len(notDone) == 0 {
		return nil
	}
	w := &WholeBatch{IDs: make([]string, 0, len(notDone))}
	for _, i := range notDone {
		s := id(i)
		w.IDs = append(w.IDs, s)
		if s == "" && results[i].Status == Failed && defaultKey {
			w.NoID = true
		}
	}
	return w
}

// Text is the error text of a whole-batch answer of package pkg: the count,
// the quoted IDs, and noID's text when a record had no ID.
func (w WholeBatch) Text(pkg, noun string, noID error) string {
	ids := make([]string, len(w.IDs))
	for i, id := range w.IDs {
		ids[i] = strconv.Quote(id)
	}
	msg := fmt.Sprintf("%s: %d %s(s) not done, the batch must be delivered again: %s", pkg, len(ids), noun, strings.Join(ids, ", "))
	if w.NoID {
		msg += " (" + noID.Error() + ")"
	}
	return msg
}

// Unwrap is what the whole-batch error unwraps to: notDone, and noID when a
// record had no ID.
func (w WholeBatch) Unwrap(notDone, noID error) []error {
	if w.NoID {
		return []error{notDone, noID}
	}
	return []error{notDone}
}
