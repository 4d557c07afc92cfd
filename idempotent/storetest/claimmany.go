package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// manyRecords is the size of the large ClaimMany call: more than one
// DynamoDB concurrency bound, and enough to split a Redis Cluster pipeline
// over every primary.
const manyRecords = 100

// claimMany calls ClaimMany, which must not fail as a whole, and checks the
// shape of its answer.
func (c *checker) claimMany(recs []storage.Record, now time.Time) []storage.ClaimOutcome {
	c.Helper()
	out, err := c.many.ClaimMany(c.ctx(), recs, now)
	if err != nil {
		c.fatalf("ClaimMany of %d records: unexpected error: %v", len(recs), err)
	}
	if len(out) != len(recs) {
		c.fatalf("ClaimMany of %d records: %d outcomes, want one per record", len(recs), len(out))
	}
	for i, o := range out {
		switch {
		case o.Err != nil && (o.Result.Claimed || o.Result.Existing != nil):
			c.errorf("ClaimMany: outcome %d (%s) has an error (%v) and a result %+v", i, recs[i].ID, o.Err, o.Result)
		case o.Result.Claimed && o.Result.Existing != nil:
			c.errorf("ClaimMany: outcome %d (%s) claimed with a non-nil Existing record", i, recs[i].ID)
		}
	}
	return out
}

// fresh returns a new INPROGRESS record for a claim at at.
func (c *checker) fresh(at time.Time) storage.Record {
	r := c.inProgress(time.Minute)
	r.ExpiresAt, r.LeaseExpiresAt = at.Add(time.Hour), at.Add(time.Minute)
	return r
}

// claimScenario is one record's situation when a claim comes at "at": setup
// writes the stored record (through the store's own Claim, Complete,
// AppendStep and Suspend, at c.now) and returns the claim to make. The
// scenarios are those of Claim's cases: each runs once through Claim and
// once through ClaimMany, which must decide the same.
type claimScenario struct {
	name  string
	steps bool // needs a StepStore
	setup func(c *checker, at time.Time) scenarioState
	// want: claimed (with TookOver and Resumed as given), or refused with
	// stored as Existing. loose leaves TookOver, and whether a refusal is an
	// error wrapping ErrCorruptRecord, to the store (Claim allows both);
	// ClaimMany must still agree with Claim.
	claimed, tookOver, resumed, loose bool
}

// scenarioState is what a scenario's setup wrote and will claim.
type scenarioState struct {
	claim  storage.Record
	stored *storage.Record // the refusing record a refused claim returns; nil when claimed
	kept   []storage.Step  // the steps a claim keeps
}

func claimScenarios() []claimScenario {
	// stored claims a record at c.now with a lease of lease and an expiry
	// of expires (both after c.now).
	stored := func(c *checker, lease, expires time.Duration) storage.Record {
		a := c.inProgress(lease)
		a.ExpiresAt = c.now.Add(expires)
		c.mustClaim(a, c.now)
		return a
	}
	withSteps := func(c *checker, a *storage.Record, n int) {
		a.Steps = someSteps(n)
		for _, st := range a.Steps {
			c.mustAppend(*a, st)
		}
	}
	return []claimScenario{
		{name: "a new key", claimed: true, setup: func(c *checker, at time.Time) scenarioState {
			return scenarioState{claim: c.fresh(at)}
		}},
		{name: "refused by a live record", setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, 3*time.Hour, 4*time.Hour)
			return scenarioState{claim: rival(a, at.Add(time.Minute)), stored: &a}
		}},
		{name: "the caller's own lease", claimed: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, 3*time.Hour, 4*time.Hour)
			return scenarioState{claim: a}
		}},
		{name: "a lapsed lease, the same payload", claimed: true, tookOver: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Second, 4*time.Hour)
			return scenarioState{claim: rival(a, at.Add(time.Minute))}
		}},
		{name: "a lapsed lease, another payload", setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Second, 4*time.Hour)
			b := rival(a, at.Add(time.Minute))
			b.Fingerprint = randomHex(32)
			return scenarioState{claim: b, stored: &a}
		}},
		{name: "a completed record", setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Second, 4*time.Hour)
			done := completed(a, []byte(`p{"n":1}`), c.now.Add(4*time.Hour))
			c.mustComplete(done)
			return scenarioState{claim: rival(a, at.Add(time.Minute)), stored: &done}
		}},
		{name: "an expired completed record", claimed: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Minute, time.Hour)
			c.mustComplete(completed(a, []byte("p-old"), c.now.Add(time.Hour)))
			b := rival(a, at.Add(time.Minute))
			b.ExpiresAt, b.Fingerprint = at.Add(time.Hour), randomHex(32)
			return scenarioState{claim: b}
		}},
		{name: "an expired in-progress record", claimed: true, loose: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Hour, time.Hour)
			b := rival(a, at.Add(time.Minute))
			b.ExpiresAt, b.Fingerprint = at.Add(time.Hour), randomHex(32)
			return scenarioState{claim: b}
		}},
		{name: "a lapsed foreign record", loose: true, setup: func(c *checker, at time.Time) scenarioState {
			foreign := c.inProgress(time.Second)
			foreign.ExpiresAt = c.now.Add(4 * time.Hour)
			foreign.Version, foreign.Fingerprint = storage.RecordVersion+1, ""
			c.mustClaim(foreign, c.now)
			b := rival(foreign, at.Add(time.Minute))
			b.Version = storage.RecordVersion
			return scenarioState{claim: b, stored: &foreign}
		}},
		{name: "a live record with steps", steps: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, 3*time.Hour, 4*time.Hour)
			withSteps(c, &a, 2)
			return scenarioState{claim: rival(a, at.Add(time.Minute)), stored: &a}
		}},
		{name: "a resumable takeover", steps: true, claimed: true, tookOver: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Second, 4*time.Hour)
			withSteps(c, &a, 2)
			return scenarioState{claim: rival(a, at.Add(time.Minute)), kept: a.Steps}
		}},
		{name: "a suspended record", steps: true, claimed: true, resumed: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, 3*time.Hour, 4*time.Hour)
			withSteps(c, &a, 3)
			if err := c.steps.Suspend(c.ctx(), a.ID, a.Lease, c.now.Add(-time.Millisecond)); err != nil {
				c.fatalf("Suspend(%s): %v", a.ID, err)
			}
			return scenarioState{claim: rival(a, at.Add(time.Minute)), kept: a.Steps}
		}},
		{name: "a takeover without a fingerprint", steps: true, claimed: true, tookOver: true, setup: func(c *checker, at time.Time) scenarioState {
			a := stored(c, time.Second, 4*time.Hour)
			withSteps(c, &a, 1)
			b := rival(a, at.Add(time.Minute))
			b.Fingerprint = ""
			return scenarioState{claim: b} // the steps may be another payload's: dropped
		}},
	}
}

// judge checks one scenario's outcome, res and err being what Claim or
// ClaimMany (how) returned for st.claim.
func (c *checker) judge(sc claimScenario, st scenarioState, res storage.ClaimResult, err error, how string) {
	c.Helper()
	what := fmt.Sprintf("%s: %s", how, sc.name)
	switch {
	case err != nil && sc.loose && !sc.claimed && errors.Is(err, storage.ErrCorruptRecord):
		return // refused as a record the store does not read: allowed
	case err != nil:
		c.errorf("%s: error %v, want a result", what, err)
	case sc.claimed && !res.Claimed:
		c.errorf("%s: refused (existing %+v), want claimed", what, res.Existing)
	case sc.claimed:
		if !sc.loose && (res.TookOver != sc.tookOver || res.Resumed != sc.resumed) {
			c.errorf("%s: TookOver = %v, Resumed = %v; want %v, %v", what, res.TookOver, res.Resumed, sc.tookOver, sc.resumed)
		}
		c.wantSteps(res, st.kept, what)
	case res.Claimed || res.Existing == nil:
		c.errorf("%s: claimed = %v, existing = %v; want refused with the stored record", what, res.Claimed, res.Existing)
	case sc.loose:
		if res.Existing.Version != st.stored.Version {
			c.errorf("%s: refused with version %d, want %d", what, res.Existing.Version, st.stored.Version)
		}
	default:
		c.sameRecord(res.Existing, *st.stored)
	}
}

// after checks what a scenario's claim left: the claimed record (with the
// steps it kept), or the refusing record untouched. A loose refusal leaves
// nothing to read back.
func (c *checker) after(sc claimScenario, st scenarioState, at time.Time) {
	c.Helper()
	want := st.stored
	if sc.claimed {
		claimedRec := st.claim
		claimedRec.Steps = st.kept
		want = &claimedRec
	} else if sc.loose {
		return
	}
	other := rival(*want, at.Add(time.Minute))
	other.Fingerprint = randomHex(32) // refused by a lapsed record too
	c.sameRecord(c.mustRefuse(other, at), *want)
}

// sameDecision checks that ClaimMany decided a scenario as Claim did.
func (c *checker) sameDecision(sc claimScenario, single, many storage.ClaimOutcome) {
	c.Helper()
	s, m := single.Result, many.Result
	if s.Claimed != m.Claimed || s.TookOver != m.TookOver || s.Resumed != m.Resumed ||
		(single.Err == nil) != (many.Err == nil) || (s.Existing == nil) != (m.Existing == nil) {
		c.errorf("%s: ClaimMany decided claimed=%v tookOver=%v resumed=%v refused=%v err=%v; Claim decided %v %v %v %v %v",
			sc.name, m.Claimed, m.TookOver, m.Resumed, m.Existing != nil, many.Err,
			s.Claimed, s.TookOver, s.Resumed, s.Existing != nil, single.Err)
	}
}

func claimManyCases() []testCase {
	return []testCase{
		{"ClaimManyNone", claimManyStore, func(c *checker) {
			for _, recs := range [][]storage.Record{nil, {}} {
				out, err := c.many.ClaimMany(c.ctx(), recs, c.now)
				if err != nil || len(out) != 0 {
					c.errorf("ClaimMany of no records (%#v): %d outcomes, error %v; want none and nil", recs, len(out), err)
				}
			}
		}},
		{"ClaimManyEveryRuleOfClaim", claimManyStore, func(c *checker) {
			// Every scenario of Claim's, once through Claim and once in one
			// ClaimMany call that mixes them all: each record is decided as
			// Claim decides it, whatever the others in the call.
			at := c.now.Add(2 * time.Hour)
			var (
				scs      []claimScenario
				singles  []scenarioState
				manys    []scenarioState
				recs     []storage.Record
				outcomes []storage.ClaimOutcome
			)
			for _, sc := range claimScenarios() {
				if sc.steps && c.steps == nil {
					continue
				}
				scs = append(scs, sc)
				singles = append(singles, sc.setup(c, at))
				st := sc.setup(c, at)
				manys = append(manys, st)
				recs = append(recs, st.claim)
			}
			for i, sc := range scs {
				res, err := c.store.Claim(c.ctx(), singles[i].claim, at)
				c.judge(sc, singles[i], res, err, "Claim")
				outcomes = append(outcomes, storage.ClaimOutcome{Result: res, Err: err})
			}
			got := c.claimMany(recs, at)
			for i, sc := range scs {
				c.judge(sc, manys[i], got[i].Result, got[i].Err, "ClaimMany")
				c.sameDecision(sc, outcomes[i], got[i])
				c.after(sc, manys[i], at)
			}
			// Claiming the same records again changes nothing: each is now
			// the caller's own, or still refused by the same record.
			again := c.claimMany(recs, at)
			for i, sc := range scs {
				if sc.loose && !sc.claimed {
					continue
				}
				if o := again[i]; o.Err != nil || o.Result.Claimed != sc.claimed || o.Result.TookOver || o.Result.Resumed {
					c.errorf("%s: the same ClaimMany again: %+v, error %v; want claimed=%v, no takeover, no resume", sc.name, o.Result, o.Err, sc.claimed)
				}
			}
		}},
		{"ClaimManyMany", claimManyStore, func(c *checker) {
			// Every seventh key is held by another lease: the outcomes
			// follow the records' order, and a second call of rivals finds
			// each record's own owner.
			recs := make([]storage.Record, manyRecords)
			owners := make([]string, manyRecords)
			for i := range recs {
				recs[i] = c.inProgress(time.Minute)
				owners[i] = recs[i].Lease
				if i%7 == 3 {
					held := rival(recs[i], c.now.Add(time.Minute))
					c.mustClaim(held, c.now)
					owners[i] = held.Lease
				}
			}
			for i, o := range c.claimMany(recs, c.now) {
				switch {
				case o.Err != nil:
					c.errorf("record %d: %v", i, o.Err)
				case o.Result.Claimed == (i%7 == 3):
					c.errorf("record %d: claimed = %v, want %v", i, o.Result.Claimed, i%7 != 3)
				case !o.Result.Claimed && o.Result.Existing.Lease != owners[i]:
					c.errorf("record %d: refused by lease %s, want %s", i, o.Result.Existing.Lease, owners[i])
				}
			}
			rivals := make([]storage.Record, manyRecords)
			for i := range recs {
				rivals[i] = rival(recs[i], c.now.Add(time.Minute))
			}
			for i, o := range c.claimMany(rivals, c.now) {
				switch {
				case o.Err != nil:
					c.errorf("rival %d: %v", i, o.Err)
				case o.Result.Claimed:
					c.errorf("rival %d: claimed a record held by lease %s", i, owners[i])
				case o.Result.Existing.ID != recs[i].ID || o.Result.Existing.Lease != owners[i]:
					c.errorf("rival %d: refused by %s (lease %s), want %s (lease %s)", i,
						o.Result.Existing.ID, o.Result.Existing.Lease, recs[i].ID, owners[i])
				}
			}
		}},
		{"ClaimManyDuplicateIDs", claimManyStore, func(c *checker) {
			// Two records of one ID in one call are refused as a whole,
			// before anything is written.
			a, b := c.inProgress(time.Minute), c.inProgress(time.Minute)
			_, err := c.many.ClaimMany(c.ctx(), []storage.Record{a, b, rival(a, c.now.Add(time.Minute))}, c.now)
			if !errors.Is(err, storage.ErrDuplicateID) {
				c.errorf("ClaimMany with a duplicate ID: error %v, want one wrapping storage.ErrDuplicateID", err)
			}
			for _, r := range []storage.Record{a, b} {
				if res := c.mustClaim(rival(r, c.now.Add(time.Minute)), c.now); res.TookOver {
					c.errorf("claim of %s after the refused ClaimMany: TookOver, want a new record", r.ID)
				}
			}
		}},
		{"ClaimManyOverlappingCalls", claimManyStore, func(c *checker) {
			// Concurrent calls over the same keys, each in another order:
			// every key has exactly one winner, and every refused claim
			// sees it.
			const keys = 20
			ids := make([]string, keys)
			for i := range ids {
				ids[i] = "storetest#" + randomHex(32)
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners = map[string][]string{} // id: leases that claimed it
				refused = map[string][]string{} // id: leases refused claims saw
				errs    []error
			)
			start := make(chan struct{})
			for range concurrency {
				lease := randomHex(16)
				recs := make([]storage.Record, keys)
				for i, p := range rand.Perm(keys) {
					recs[i] = c.inProgress(time.Minute)
					recs[i].ID, recs[i].Lease = ids[p], lease
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					out, err := c.many.ClaimMany(c.ctx(), recs, c.now)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
						return
					}
					for i, o := range out {
						switch {
						case o.Err != nil:
							errs = append(errs, o.Err)
						case o.Result.Claimed:
							winners[recs[i].ID] = append(winners[recs[i].ID], lease)
						default:
							refused[recs[i].ID] = append(refused[recs[i].ID], o.Result.Existing.Lease)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				c.fatalf("overlapping ClaimMany calls failed: %v", errs)
			}
			for _, id := range ids {
				if len(winners[id]) != 1 {
					c.errorf("%s: %d calls claimed it, want exactly 1", id, len(winners[id]))
					continue
				}
				for _, l := range refused[id] {
					if l != winners[id][0] {
						c.errorf("%s: a refused claim saw lease %s, want the winner's %s", id, l, winners[id][0])
					}
				}
			}
		}},
		{"ClaimManyCancelledContext", claimManyStore, func(c *checker) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			recs := []storage.Record{c.inProgress(time.Minute), c.inProgress(time.Minute)}
			out, err := c.many.ClaimMany(ctx, recs, c.now)
			if err != nil {
				return
			}
			for i, o := range out {
				if o.Err == nil {
					c.errorf("ClaimMany with a cancelled context: record %d decided (%+v), want an error", i, o.Result)
				}
			}
		}},
	}
}

// claimManyCorruptCase is RunAdmin's case of a corrupt record in a
// ClaimMany call: plant writes one under a fresh ID.
func claimManyCorruptCase(plant func(c *checker, prefix string) string) testCase {
	return testCase{"ClaimManyCorrupt", claimManyStore, func(c *checker) {
		// A stored record that does not decode fails its own claim, as
		// Claim's, and no other.
		bad := c.inProgress(time.Minute)
		bad.ID = plant(c, "storetest#")
		if _, err := c.store.Claim(c.ctx(), bad, c.now); !errors.Is(err, storage.ErrCorruptRecord) {
			c.fatalf("Claim over a corrupt record: error %v, want one wrapping storage.ErrCorruptRecord", err)
		}
		first, last := c.inProgress(time.Minute), c.inProgress(time.Minute)
		bad.ID = plant(c, "storetest#")
		out := c.claimMany([]storage.Record{first, bad, last}, c.now)
		if !errors.Is(out[1].Err, storage.ErrCorruptRecord) {
			c.errorf("ClaimMany: the corrupt record's error %v, want one wrapping storage.ErrCorruptRecord", out[1].Err)
		}
		for i, r := range []storage.Record{first, last} {
			if o := out[2*i]; o.Err != nil || !o.Result.Claimed {
				c.errorf("ClaimMany: %s beside a corrupt record: %+v, error %v; want claimed", r.ID, o.Result, o.Err)
			}
			c.sameRecord(c.mustRefuse(rival(r, c.now.Add(time.Minute)), c.now), r)
		}
	}}
}
