package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
)

// rec is a record of the property test: a shard (checkpoint unit), an
// idempotency key, and whether its handler fails in the first delivery.
type rec struct {
	ID   int
	Unit string
	Key  string
	Fail bool
}

// world runs a handler that records its calls and fails the records marked
// to fail while failing is on.
type world struct {
	mu        sync.Mutex
	calls     []int          // record IDs, in call order
	succeeded map[string]int // successful calls per key
	active    map[string]int
	overlap   bool
	failing   bool
}

func (w *world) handle(_ context.Context, r rec) error {
	w.mu.Lock()
	w.calls = append(w.calls, r.ID)
	w.active[r.Key]++
	if w.active[r.Key] > 1 {
		w.overlap = true
	}
	fail := w.failing && r.Fail
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.active[r.Key]--
		if !fail {
			w.succeeded[r.Key]++
		}
		w.mu.Unlock()
	}()
	if fail {
		return errors.New("handler failed")
	}
	return nil
}

// TestCheckpointProperty: for any batch (shards, duplicate keys, failures),
// any parallelism and order mode, the checkpoint response and the records
// done cover every record exactly once (the records before a shard's
// checkpoint are done; the checkpoint and everything after it are delivered
// again), the records of a lane run in batch order and, with Stop, never
// after a failure of their lane; same-key records never overlap; and after
// the redelivery (failures fixed) every key's handler succeeded exactly once.
func TestCheckpointProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		units := rapid.IntRange(1, 3).Draw(t, "units")
		keys := rapid.IntRange(1, 8).Draw(t, "keys")
		recs := make([]rec, n)
		for i := range recs {
			recs[i] = rec{
				ID:   i,
				Unit: fmt.Sprintf("shard-%d", rapid.IntRange(0, units-1).Draw(t, "unit")),
				Key:  fmt.Sprintf("k%d", rapid.IntRange(0, keys-1).Draw(t, "key")),
				Fail: rapid.Float64Range(0, 1).Draw(t, "p") < 0.3,
			}
		}
		stop := rapid.Bool().Draw(t, "stop")
		byKey := rapid.Bool().Draw(t, "lanes by key")
		parallelism := rapid.IntRange(1, 3).Draw(t, "parallelism")

		w := &world{succeeded: map[string]int{}, active: map[string]int{}, failing: true}
		e := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
		p := batch.New(e, "Wrap", batch.Source[rec, rec]{
			Name: "test", Noun: "record", Handle: w.handle,
			Decode:  func(r *rec) (rec, error) { return *r, nil },
			Key:     func(r *rec, _ rec) (string, error) { return r.Key, nil },
			Attrs:   func(r *rec) []slog.Attr { return []slog.Attr{slog.Int("id", r.ID)} },
			Context: func(ctx context.Context, _ *rec) context.Context { return ctx },
		}, settings(batch.WithParallelism[rec](parallelism), continueIf(!stop)))
		laneOf := func(rs []rec) func(i int, _ string) string {
			return func(i int, _ string) string {
				if byKey {
					return rs[i].Unit + "/" + rs[i].Key
				}
				return rs[i].Unit
			}
		}
		unitOf := func(rs []rec) func(int) string { return func(i int) string { return rs[i].Unit } }

		results := p.Run(context.Background(), recs, batch.Order{Lane: laneOf(recs), Stop: stop, LaneNoun: "shard"})
		redeliver := checkDelivery(t, recs, results, w, stop, laneOf(recs), unitOf(recs))

		// The redelivery, failures fixed: everything is done, and every key's
		// handler has succeeded exactly once over both deliveries.
		w.failing = false
		again := p.Run(context.Background(), redeliver, batch.Order{Lane: laneOf(redeliver), Stop: stop})
		require.Empty(t, batch.Checkpoints(again, unitOf(redeliver)), "the redelivery leaves no checkpoint")
		for _, r := range recs {
			require.Equal(t, 1, w.succeeded[r.Key], "successful handler calls of key %s", r.Key)
		}
	})
}

// checkDelivery checks one delivery of recs that gave results: per unit,
// everything before the checkpoint is done and the checkpoint is not (units
// without one are all done: exactly-once cover); the calls of one lane came
// in batch order, and with stop none after a record of its lane that is not
// done; same-key records never overlapped. It returns what Lambda delivers
// again: each unit from its checkpoint on.
func checkDelivery(t *rapid.T, recs []rec, results []batch.Result, w *world, stop bool, lane func(int, string) string, unit func(int) string) []rec {
	cp := map[string]int{}
	for _, i := range batch.Checkpoints(results, unit) {
		require.NotContains(t, cp, recs[i].Unit, "two checkpoints for one shard")
		cp[recs[i].Unit] = i
		require.NotEqual(t, batch.Done, results[i].Status, "checkpoint %d is done", i)
	}
	var redeliver []rec
	for i, r := range recs {
		if at, has := cp[r.Unit]; !has || i < at {
			require.Equal(t, batch.Done, results[i].Status, "record %d before its checkpoint: it would be lost", i)
		} else {
			redeliver = append(redeliver, r)
		}
	}
	last := map[string]int{}
	for _, id := range w.calls {
		l := lane(id, "")
		if prev, ok := last[l]; ok {
			require.Less(t, prev, id, "lane %s out of order", l)
		}
		last[l] = id
	}
	if stop {
		for i := range recs {
			if results[i].Status == batch.Done {
				continue
			}
			for j := i + 1; j < len(recs); j++ {
				if lane(j, "") == lane(i, "") {
					require.Equal(t, batch.Skipped, results[j].Status, "record %d after %d of its lane failed", j, i)
				}
			}
		}
	}
	require.False(t, w.overlap, "records of one key ran at the same time")
	return redeliver
}

// settings are the Settings made by opts, as a source's Wrap makes them.
func settings(opts ...func(*batch.Settings[rec])) batch.Settings[rec] { return batch.Apply(opts) }

// continueIf is WithContinueOnFailure when cont, else no option.
func continueIf(cont bool) func(*batch.Settings[rec]) {
	if cont {
		return batch.WithContinueOnFailure[rec]()
	}
	return func(*batch.Settings[rec]) {}
}

// TestNotDone: what a queue source reports.
func TestNotDone(t *testing.T) {
	rs := []batch.Result{{Status: batch.Done}, {Status: batch.Failed}, {Status: batch.Skipped}, {Status: batch.Done}, {Status: batch.NotRun}}
	assert.Equal(t, []int{1, 2, 4}, batch.NotDone(rs))
	assert.Equal(t, "skipped", batch.Skipped.String())
	assert.Equal(t, "unknown", batch.Status(7).String())
}
