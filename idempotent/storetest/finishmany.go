package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// finishOp is CompleteMany or ReleaseMany, beside the single call it
// batches.
type finishOp struct {
	name   string // of the many call
	single func(c *checker, rec storage.Record) error
	many   func(c *checker, ctx context.Context, recs []storage.Record) ([]error, error)
}

var (
	completeOp = finishOp{
		name:   "CompleteMany",
		single: func(c *checker, rec storage.Record) error { return c.store.Complete(c.ctx(), rec) },
		many: func(c *checker, ctx context.Context, recs []storage.Record) ([]error, error) {
			return c.finish.CompleteMany(ctx, recs)
		},
	}
	releaseOp = finishOp{
		name:   "ReleaseMany",
		single: func(c *checker, rec storage.Record) error { return c.store.Release(c.ctx(), rec.ID, rec.Lease) },
		many: func(c *checker, ctx context.Context, recs []storage.Record) ([]error, error) {
			// Only ID and Lease are read: nothing else is passed.
			only := make([]storage.Record, len(recs))
			for i, r := range recs {
				only[i] = storage.Record{ID: r.ID, Lease: r.Lease}
			}
			return c.finish.ReleaseMany(ctx, only)
		},
	}
)

// finishMany calls op's many call, which must not fail as a whole, and
// checks the shape of its answer.
func (c *checker) finishMany(op finishOp, recs []storage.Record) []error {
	c.Helper()
	errs, err := op.many(c, c.ctx(), recs)
	if err != nil {
		c.fatalf("%s of %d records: unexpected error: %v", op.name, len(recs), err)
	}
	if len(errs) != len(recs) {
		c.fatalf("%s of %d records: %d errors, want one per record", op.name, len(recs), len(errs))
	}
	return errs
}

// finishScenario is one record's situation when it is completed or
// released: setup writes the stored record (through the store's own Claim,
// Complete, Release, AppendStep and Suspend, at c.now) and returns the
// record to complete (or release, by its ID and Lease). Each scenario runs
// once through the single call and once in the many call, which must
// decide the same.
type finishScenario struct {
	name  string
	steps bool // needs a StepStore
	setup func(c *checker) finishState
	// want is nil, or the error both calls' error must wrap.
	want error
}

// finishState is what a scenario's setup wrote and will complete or
// release.
type finishState struct {
	rec   storage.Record
	after *storage.Record // the record stored after the call; nil for none
}

// finishSetups are the helpers of the scenarios' setups.
type finishSetups struct{}

// claimed claims a fresh record at c.now, with steps steps (a StepStore's).
func (finishSetups) claimed(c *checker, steps int) storage.Record {
	a := c.inProgress(time.Hour)
	c.mustClaim(a, c.now)
	if steps > 0 {
		a.Steps = someSteps(steps)
		for _, st := range a.Steps {
			c.mustAppend(a, st)
		}
	}
	return a
}

// suspended is claimed with steps, then suspended by its owner.
func (f finishSetups) suspended(c *checker) storage.Record {
	a := f.claimed(c, 2)
	end := c.now.Add(-time.Millisecond)
	if err := c.steps.Suspend(c.ctx(), a.ID, a.Lease, end); err != nil {
		c.fatalf("Suspend(%s): %v", a.ID, err)
	}
	a.LeaseExpiresAt, a.Suspended = end, true
	return a
}

// done is claimed and completed by its owner.
func (f finishSetups) done(c *checker) storage.Record {
	d := completed(f.claimed(c, 0), []byte("p-done"), c.now.Add(time.Hour))
	c.mustComplete(d)
	return d
}

// completion is a's completion by its owner.
func completion(c *checker, a storage.Record, data []byte) storage.Record {
	d := completed(a, data, c.now.Add(2*time.Hour))
	d.Steps, d.Suspended = nil, false // a completion drops them
	return d
}

func completeScenarios() []finishScenario {
	var f finishSetups
	completes := func(a storage.Record) func(c *checker) finishState {
		return func(c *checker) finishState {
			d := completion(c, a, []byte("p-completed"))
			return finishState{rec: d, after: &d}
		}
	}
	return []finishScenario{
		{name: "the caller's in-progress record", setup: func(c *checker) finishState {
			return completes(f.claimed(c, 0))(c)
		}},
		{name: "the caller's completed record (a retried completion)", setup: func(c *checker) finishState {
			return completes(f.done(c))(c)
		}},
		{name: "a record of another lease", want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			a := f.claimed(c, 0)
			return finishState{rec: completion(c, rival(a, time.Time{}), []byte("p-forged")), after: &a}
		}},
		{name: "a completed record of another lease", want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			d := f.done(c)
			return finishState{rec: completion(c, rival(d, time.Time{}), []byte("p-forged")), after: &d}
		}},
		{name: "a record that is gone", want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			return finishState{rec: completion(c, c.inProgress(time.Hour), []byte("p-gone"))}
		}},
		{name: "a released record", want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			a := f.claimed(c, 0)
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release(%s): %v", a.ID, err)
			}
			return finishState{rec: completion(c, a, []byte("p-released"))}
		}},
		{name: "a record too large to store", want: storage.ErrTooLarge, setup: func(c *checker) finishState {
			a := f.claimed(c, 0)
			return finishState{rec: completion(c, a, bytes.Repeat([]byte{'x'}, 500<<10)), after: &a}
		}},
		{name: "the caller's record with steps", steps: true, setup: func(c *checker) finishState {
			return completes(f.claimed(c, 2))(c)
		}},
		{name: "the caller's suspended record", steps: true, setup: func(c *checker) finishState {
			return completes(f.suspended(c))(c)
		}},
	}
}

func releaseScenarios() []finishScenario {
	var f finishSetups
	kept := func(a storage.Record, lease string) finishState {
		rec := a
		rec.Lease = lease
		return finishState{rec: rec, after: &a}
	}
	return []finishScenario{
		{name: "the caller's in-progress record", setup: func(c *checker) finishState {
			return finishState{rec: f.claimed(c, 0)}
		}},
		{name: "a record of another lease", want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			return kept(f.claimed(c, 0), randomHex(16))
		}},
		{name: "a record that is gone", setup: func(c *checker) finishState {
			return finishState{rec: c.inProgress(time.Hour)}
		}},
		{name: "a record released before", setup: func(c *checker) finishState {
			a := f.claimed(c, 0)
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release(%s): %v", a.ID, err)
			}
			return finishState{rec: a}
		}},
		{name: "the caller's completed record", want: storage.ErrAlreadyCompleted, setup: func(c *checker) finishState {
			d := f.done(c)
			return kept(d, d.Lease)
		}},
		{name: "a completed record of another lease", want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			return kept(f.done(c), randomHex(16))
		}},
		{name: "the caller's record with steps", steps: true, setup: func(c *checker) finishState {
			return finishState{rec: f.claimed(c, 2)}
		}},
		{name: "the caller's suspended record", steps: true, setup: func(c *checker) finishState {
			return finishState{rec: f.suspended(c)}
		}},
		{name: "a suspended record of another lease", steps: true, want: storage.ErrLeaseLost, setup: func(c *checker) finishState {
			return kept(f.suspended(c), randomHex(16))
		}},
	}
}

// finishVerdict names what err is, of the errors the scenarios expect.
func finishVerdict(err error) string {
	for _, sentinel := range []error{storage.ErrLeaseLost, storage.ErrAlreadyCompleted, storage.ErrTooLarge} {
		if errors.Is(err, sentinel) {
			return "an error wrapping " + sentinel.Error()
		}
	}
	if err != nil {
		return fmt.Sprintf("an unexpected error (%v)", err)
	}
	return "nil"
}

// judgeFinish checks one scenario's error, err being what the single call
// or the many call (how) returned for its record.
func (c *checker) judgeFinish(sc finishScenario, err error, how string) {
	c.Helper()
	if got, want := finishVerdict(err), finishVerdict(sc.want); got != want {
		c.errorf("%s: %s: %s, want %s", how, sc.name, got, want)
	}
}

// finishedAs checks what a scenario's call left: st.after untouched (a
// claim for another payload is refused with it), or no record (a rival's
// claim makes a new one, with no steps).
func (c *checker) finishedAs(sc finishScenario, st finishState, how string) {
	c.Helper()
	other := c.inProgress(time.Minute) // another payload: refused by a suspended record too
	other.ID = st.rec.ID
	if st.after != nil {
		c.sameRecord(c.mustRefuse(other, c.now), *st.after)
		return
	}
	res, err := c.store.Claim(c.ctx(), other, c.now)
	switch {
	case err != nil:
		c.errorf("%s: %s: claim after the call: %v", how, sc.name, err)
	case !res.Claimed:
		c.errorf("%s: %s: a record is left (%+v), want none", how, sc.name, res.Existing)
	case res.TookOver || res.Resumed || len(res.Steps) > 0:
		c.errorf("%s: %s: the claim after the call took over (TookOver %v, Resumed %v, %d steps), want a new record",
			how, sc.name, res.TookOver, res.Resumed, len(res.Steps))
	}
}

// everyRuleOf is the case of op: every scenario, once through the single
// call and once in one many call that mixes them all.
func everyRuleOf(op finishOp, scenarios func() []finishScenario) func(c *checker) {
	return func(c *checker) {
		var (
			scs     []finishScenario
			singles []finishState
			manys   []finishState
			recs    []storage.Record
		)
		for _, sc := range scenarios() {
			if sc.steps && c.steps == nil {
				continue
			}
			scs = append(scs, sc)
			singles = append(singles, sc.setup(c))
			st := sc.setup(c)
			manys = append(manys, st)
			recs = append(recs, st.rec)
		}
		single := "the single call of " + op.name
		for i, sc := range scs {
			c.judgeFinish(sc, op.single(c, singles[i].rec), single)
			c.finishedAs(sc, singles[i], single)
		}
		errs := c.finishMany(op, recs)
		for i, sc := range scs {
			c.judgeFinish(sc, errs[i], op.name)
			c.finishedAs(sc, manys[i], op.name)
		}
	}
}

func finishManyCases() []testCase {
	return []testCase{
		{"FinishManyNone", finishManyStore, func(c *checker) {
			for _, op := range []finishOp{completeOp, releaseOp} {
				for _, recs := range [][]storage.Record{nil, {}} {
					errs, err := op.many(c, c.ctx(), recs)
					if err != nil || len(errs) != 0 {
						c.errorf("%s of no records (%#v): %d errors, error %v; want none and nil", op.name, recs, len(errs), err)
					}
				}
			}
		}},
		{"CompleteManyEveryRuleOfComplete", finishManyStore, everyRuleOf(completeOp, completeScenarios)},
		{"ReleaseManyEveryRuleOfRelease", finishManyStore, everyRuleOf(releaseOp, releaseScenarios)},
		{"CompleteManyMany", finishManyStore, func(c *checker) {
			// Each record completes with its own response (and every
			// other one with a trace): the writes follow the records.
			recs := make([]storage.Record, manyRecords)
			for i := range recs {
				a := c.inProgress(time.Minute)
				c.mustClaim(a, c.now)
				recs[i] = completion(c, a, fmt.Appendf(nil, "p-many-%d", i))
				if i%2 == 1 {
					recs[i].Trace = traceparent
				}
			}
			for i, err := range c.finishMany(completeOp, recs) {
				if err != nil {
					c.errorf("record %d: %v", i, err)
				}
			}
			for _, d := range recs {
				got := c.mustRefuse(rival(d, c.now.Add(time.Minute)), c.now)
				c.sameRecord(got, d)
				if got.Trace != d.Trace {
					c.errorf("record %s: Trace = %q, want %q", d.ID, got.Trace, d.Trace)
				}
			}
		}},
		{"ReleaseManyMany", finishManyStore, func(c *checker) {
			recs := make([]storage.Record, manyRecords)
			for i := range recs {
				recs[i] = c.inProgress(time.Minute)
				c.mustClaim(recs[i], c.now)
			}
			for i, err := range c.finishMany(releaseOp, recs) {
				if err != nil {
					c.errorf("record %d: %v", i, err)
				}
			}
			for _, a := range recs {
				if res := c.mustClaim(rival(a, c.now.Add(time.Minute)), c.now); res.TookOver || res.Resumed {
					c.errorf("claim of %s after ReleaseMany: TookOver %v, Resumed %v; want a new record", a.ID, res.TookOver, res.Resumed)
				}
			}
		}},
		{"FinishManyDuplicateIDs", finishManyStore, func(c *checker) {
			// Two records of one ID in one call are refused as a whole,
			// before anything is written.
			for _, op := range []finishOp{completeOp, releaseOp} {
				a, b := c.inProgress(time.Minute), c.inProgress(time.Minute)
				c.mustClaim(a, c.now)
				c.mustClaim(b, c.now)
				recs := []storage.Record{
					completion(c, a, []byte("p-a")), completion(c, b, []byte("p-b")), completion(c, a, []byte("p-a-again")),
				}
				_, err := op.many(c, c.ctx(), recs)
				if !errors.Is(err, storage.ErrDuplicateID) {
					c.errorf("%s with a duplicate ID: error %v, want one wrapping storage.ErrDuplicateID", op.name, err)
				}
				for _, r := range []storage.Record{a, b} {
					c.sameRecord(c.mustRefuse(rival(r, c.now.Add(time.Minute)), c.now), r)
				}
			}
		}},
		{"FinishManyCancelledContext", finishManyStore, func(c *checker) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for _, op := range []finishOp{completeOp, releaseOp} {
				a, b := c.inProgress(time.Minute), c.inProgress(time.Minute)
				c.mustClaim(a, c.now)
				c.mustClaim(b, c.now)
				errs, err := op.many(c, ctx, []storage.Record{completion(c, a, []byte("p")), completion(c, b, []byte("p"))})
				if err != nil {
					continue
				}
				if len(errs) != 2 {
					c.errorf("%s with a cancelled context: %d errors for 2 records, and no error", op.name, len(errs))
					continue
				}
				for i, e := range errs {
					if e == nil {
						c.errorf("%s with a cancelled context: record %d decided, want an error", op.name, i)
					}
				}
			}
		}},
		{"TextOfEveryValidIDInFinishMany", finishManyStore, func(c *checker) {
			// The IDs of TextOfEveryValidID: one ReleaseMany call gives each
			// back, one CompleteMany call completes the next claim of each.
			hex := randomHex(32)
			ids := longestIDs(hex)
			for _, p := range textPrefixes {
				ids = append(ids, p+"#"+hex)
			}
			recs := make([]storage.Record, len(ids))
			for i, id := range ids {
				recs[i] = c.inProgress(time.Minute)
				recs[i].ID = id
				c.mustClaim(recs[i], c.now)
			}
			for i, err := range c.finishMany(releaseOp, recs) {
				if err != nil {
					c.fatalf("ReleaseMany: %q: %v", recs[i].ID, err)
				}
			}
			for i, a := range recs {
				next := rival(a, c.now.Add(time.Minute))
				if res := c.mustClaim(next, c.now); res.TookOver {
					c.errorf("claim of %q after ReleaseMany: TookOver, want a new record", a.ID)
				}
				recs[i] = completion(c, next, fmt.Appendf(nil, "p-text-%d", i))
			}
			for i, err := range c.finishMany(completeOp, recs) {
				if err != nil {
					c.fatalf("CompleteMany: %q: %v", recs[i].ID, err)
				}
			}
			for _, d := range recs {
				c.sameRecord(c.mustRefuse(rival(d, c.now.Add(time.Minute)), c.now), d)
			}
		}},
	}
}
