package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// concurrency is the number of goroutines racing for one key in the
// concurrent-claim case.
const concurrency = 16

type testCase struct {
	name  string
	needs capability
	run   func(c *checker)
}

// capability is the optional interface a case needs of the store.
type capability int

const (
	base            capability = iota // the Store contract alone
	stepStore                         // storage.StepStore
	txStore                           // storage.TxStore
	adminStore                        // storage.AdminStore
	claimManyStore                    // storage.ClaimManyStore
	finishManyStore                   // storage.FinishManyStore
)

// Run checks store against the Store contract. The cases of the optional
// capabilities storage.StepStore, storage.TxStore (the transaction's
// record: commit, fence, rollback, retry, a commit without a record),
// storage.ClaimManyStore (every rule of Claim for each record of one call,
// mixed outcomes, many records, duplicate IDs, overlapping calls),
// storage.FinishManyStore (every rule of Complete and Release for each
// record of one call, many records, duplicate IDs) and storage.AdminStore
// (get, delete as read, a change or a release since the read, scan by
// prefix and status) run only when store implements them; on a *testing.T
// they are then reported as skipped. With a *testing.T each case is a subtest; with any other
// testing.TB the cases run in sequence and failures name their case.
// RunTx adds the transaction cases with the store's own writes, RunAdmin
// the corrupt records an AdminStore reports.
func Run(t testing.TB, store storage.Store) {
	t.Helper()
	run(t, store, slices.Concat(cases(), textCases(), traceCases(), txCases(), claimManyCases(), finishManyCases(), adminCases()), nil)
}

// run runs the cases on store, skipping those of a capability it lacks.
func run(t testing.TB, store storage.Store, cs []testCase, w TxWrites) {
	t.Helper()
	steps, _ := store.(storage.StepStore)
	txs, _ := store.(storage.TxStore)
	admin, _ := store.(storage.AdminStore)
	many, _ := store.(storage.ClaimManyStore)
	finish, _ := store.(storage.FinishManyStore)
	base := time.Unix(time.Now().Unix(), 0)
	missing := func(tc testCase) string {
		switch {
		case tc.needs == stepStore && steps == nil:
			return "the store is not a storage.StepStore"
		case tc.needs == txStore && txs == nil:
			return "the store is not a storage.TxStore"
		case tc.needs == adminStore && admin == nil:
			return "the store is not a storage.AdminStore"
		case tc.needs == claimManyStore && many == nil:
			return "the store is not a storage.ClaimManyStore"
		case tc.needs == finishManyStore && finish == nil:
			return "the store is not a storage.FinishManyStore"
		}
		return ""
	}
	for _, tc := range cs {
		if tt, ok := t.(*testing.T); ok {
			tt.Run(tc.name, func(st *testing.T) {
				if why := missing(tc); why != "" {
					st.Skip(why)
				}
				tc.run(&checker{TB: st, store: store, steps: steps, txs: txs, admin: admin, many: many, finish: finish, writes: w, now: base, prefix: ""})
			})
			continue
		}
		if missing(tc) != "" {
			continue
		}
		tc.run(&checker{TB: t, store: store, steps: steps, txs: txs, admin: admin, many: many, finish: finish, writes: w, now: base, prefix: tc.name + ": "})
	}
}

type checker struct {
	testing.TB
	store  storage.Store
	steps  storage.StepStore       // nil unless store is one
	txs    storage.TxStore         // nil unless store is one
	admin  storage.AdminStore      // nil unless store is one
	many   storage.ClaimManyStore  // nil unless store is one
	finish storage.FinishManyStore // nil unless store is one
	writes TxWrites                // RunTx's
	now    time.Time
	prefix string
}

func (c *checker) fatalf(format string, args ...any) {
	c.Helper()
	c.Fatalf(c.prefix+format, args...)
}

func (c *checker) errorf(format string, args ...any) {
	c.Helper()
	c.Errorf(c.prefix+format, args...)
}

func (c *checker) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c.Cleanup(cancel)
	return ctx
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// inProgress returns a fresh INPROGRESS record whose lease ends after lease.
func (c *checker) inProgress(lease time.Duration) storage.Record {
	return storage.Record{
		ID:             "storetest#" + randomHex(32),
		Status:         storage.StatusInProgress,
		ExpiresAt:      c.now.Add(time.Hour),
		LeaseExpiresAt: c.now.Add(lease),
		Lease:          randomHex(16),
		Fingerprint:    randomHex(32),
		Version:        storage.RecordVersion,
	}
}

// rival is another invocation's claim of the same record.
func rival(r storage.Record, lease time.Time) storage.Record {
	r.Lease = randomHex(16)
	r.LeaseExpiresAt = lease
	return r
}

func completed(r storage.Record, data []byte, expires time.Time) storage.Record {
	r.Status = storage.StatusCompleted
	r.Data = data
	r.ExpiresAt = expires
	r.LeaseExpiresAt = time.Time{}
	return r
}

func (c *checker) claim(rec storage.Record, now time.Time) storage.ClaimResult {
	c.Helper()
	res, err := c.store.Claim(c.ctx(), rec, now)
	if err != nil {
		c.fatalf("Claim(%s): unexpected error: %v", rec.ID, err)
	}
	if res.Claimed && res.Existing != nil {
		c.errorf("Claim: Claimed with a non-nil Existing record")
	}
	return res
}

func (c *checker) mustClaim(rec storage.Record, now time.Time) storage.ClaimResult {
	c.Helper()
	res := c.claim(rec, now)
	if !res.Claimed {
		c.fatalf("Claim(%s) at %v: refused, want claimed (existing: %+v)", rec.ID, now, res.Existing)
	}
	return res
}

func (c *checker) mustRefuse(rec storage.Record, now time.Time) *storage.Record {
	c.Helper()
	res := c.claim(rec, now)
	if res.Claimed || res.Existing == nil {
		c.fatalf("Claim(%s) at %v: claimed=%v existing=%v, want refused with the live record", rec.ID, now, res.Claimed, res.Existing)
	}
	return res.Existing
}

func (c *checker) mustComplete(rec storage.Record) {
	c.Helper()
	if err := c.store.Complete(c.ctx(), rec); err != nil {
		c.fatalf("Complete(%s): %v", rec.ID, err)
	}
}

func (c *checker) wantLeaseLost(err error, op string) {
	c.Helper()
	if !errors.Is(err, storage.ErrLeaseLost) {
		c.errorf("%s: error %v, want one wrapping storage.ErrLeaseLost", op, err)
	}
}

// wantAlreadyCompleted checks that err (of a release or suspend of the
// caller's completed record) wraps storage.ErrAlreadyCompleted.
func (c *checker) wantAlreadyCompleted(err error, op string) {
	c.Helper()
	if !errors.Is(err, storage.ErrAlreadyCompleted) {
		c.errorf("%s: error %v, want one wrapping storage.ErrAlreadyCompleted", op, err)
	}
}

// sameRecord compares a returned record with what was written, at the
// precision stores keep (seconds for ExpiresAt, milliseconds for the lease).
func (c *checker) sameRecord(got *storage.Record, want storage.Record) {
	c.Helper()
	var diffs []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("ID", got.ID == want.ID, got.ID, want.ID)
	check("Status", got.Status == want.Status, got.Status, want.Status)
	check("ExpiresAt", got.ExpiresAt.Unix() == want.ExpiresAt.Unix(), got.ExpiresAt, want.ExpiresAt)
	wantLease, gotLease := int64(0), int64(0)
	if !want.LeaseExpiresAt.IsZero() {
		wantLease = want.LeaseExpiresAt.UnixMilli()
	}
	if !got.LeaseExpiresAt.IsZero() {
		gotLease = got.LeaseExpiresAt.UnixMilli()
	}
	check("LeaseExpiresAt (ms)", gotLease == wantLease, gotLease, wantLease)
	check("Lease", got.Lease == want.Lease, got.Lease, want.Lease)
	check("Fingerprint", got.Fingerprint == want.Fingerprint, got.Fingerprint, want.Fingerprint)
	check("Data", bytes.Equal(got.Data, want.Data), len(got.Data), len(want.Data))
	check("Version", got.Version == want.Version, got.Version, want.Version)
	check("Steps", sameSteps(got.Steps, want.Steps), stepNames(got.Steps), stepNames(want.Steps))
	check("Suspended", got.Suspended == want.Suspended, got.Suspended, want.Suspended)
	for _, d := range diffs {
		c.errorf("record %s: %s", want.ID, d)
	}
}

func sameSteps(got, want []storage.Step) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
			return false
		}
	}
	return true
}

func stepNames(steps []storage.Step) []string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = fmt.Sprintf("%s(%d bytes)", st.Name, len(st.Data))
	}
	return names
}

func (c *checker) mustAppend(rec storage.Record, step storage.Step) {
	c.Helper()
	if err := c.steps.AppendStep(c.ctx(), rec.ID, rec.Lease, step); err != nil {
		c.fatalf("AppendStep(%s, %s): %v", rec.ID, step.Name, err)
	}
}

func (c *checker) wantSteps(res storage.ClaimResult, want []storage.Step, what string) {
	c.Helper()
	if !sameSteps(res.Steps, want) {
		c.errorf("%s: ClaimResult.Steps = %v, want %v", what, stepNames(res.Steps), stepNames(want))
	}
}

// someSteps returns n steps with distinct names and binary data.
func someSteps(n int) []storage.Step {
	steps := make([]storage.Step, n)
	for i := range steps {
		data := []byte{0, byte(i), 0xff, '"', '\\'}
		steps[i] = storage.Step{Name: fmt.Sprintf("step-%d", i+1), Data: append(data, randomHex(8)...)}
	}
	return steps
}

func cases() []testCase {
	return []testCase{
		{"ClaimNew", base, func(c *checker) {
			res := c.mustClaim(c.inProgress(time.Minute), c.now)
			if res.TookOver {
				c.errorf("claim of a new key reported TookOver")
			}
		}},
		{"ClaimRefusedWhileInProgress", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			got := c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(30*time.Second))
			c.sameRecord(got, a)
		}},
		{"ClaimRetriedWithOwnLease", base, func(c *checker) {
			// A claim whose response was lost is retried with the same lease.
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			if res := c.mustClaim(a, c.now.Add(time.Second)); res.TookOver {
				c.errorf("retried claim with its own lease reported TookOver")
			}
		}},
		{"CompleteThenReplay", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			done := completed(a, []byte(`p{"ok":true}`), c.now.Add(time.Hour))
			c.mustComplete(done)
			got := c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Minute))
			c.sameRecord(got, done)
		}},
		{"CompletedIsNotTakenOverAfterLease", base, func(c *checker) {
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			c.mustComplete(completed(a, []byte("p1"), c.now.Add(time.Hour)))
			got := c.mustRefuse(rival(a, c.now.Add(time.Hour)), c.now.Add(10*time.Minute))
			if got.Status != storage.StatusCompleted {
				c.errorf("status %q, want COMPLETED", got.Status)
			}
		}},
		{"CompleteRetried", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			done := completed(a, []byte("p-retried"), c.now.Add(time.Hour))
			c.mustComplete(done)
			c.mustComplete(done) // a retried completion succeeds again
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"CompleteFencedByLease", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			forged := completed(a, []byte("p-forged"), c.now.Add(time.Hour))
			forged.Lease = randomHex(16)
			c.wantLeaseLost(c.store.Complete(c.ctx(), forged), "Complete with another lease")
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
		}},
		{"CompleteMissingRecord", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.wantLeaseLost(c.store.Complete(c.ctx(), completed(a, []byte("p"), c.now.Add(time.Hour))), "Complete of a missing record")
		}},
		{"ReleaseThenClaimAgain", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release: %v", err)
			}
			if res := c.mustClaim(rival(a, c.now.Add(time.Minute)), c.now); res.TookOver {
				c.errorf("claim after release reported TookOver")
			}
		}},
		{"ReleaseFencedByLease", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			c.wantLeaseLost(c.store.Release(c.ctx(), a.ID, randomHex(16)), "Release with another lease")
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
		}},
		{"ReleaseMissingRecord", base, func(c *checker) {
			if err := c.store.Release(c.ctx(), "storetest#"+randomHex(32), randomHex(16)); err != nil {
				c.errorf("Release of a missing record: %v, want nil", err)
			}
		}},
		{"ReleaseTwice", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			for i := range 2 {
				if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
					c.errorf("Release #%d: %v", i+1, err)
				}
			}
		}},
		{"TakeoverAfterLease", base, func(c *checker) {
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			later := c.now.Add(2 * time.Second)
			b := rival(a, later.Add(time.Minute))
			if res := c.mustClaim(b, later); !res.TookOver || res.Resumed {
				c.errorf("claim after the lease lapsed: TookOver = %v, Resumed = %v; want a takeover (true, false)", res.TookOver, res.Resumed)
			}
			// The first owner is fenced out.
			c.wantLeaseLost(c.store.Complete(c.ctx(), completed(a, []byte("p-late"), later.Add(time.Hour))), "late Complete by the previous owner")
			c.wantLeaseLost(c.store.Release(c.ctx(), a.ID, a.Lease), "late Release by the previous owner")
			done := completed(b, []byte("p-new-owner"), later.Add(time.Hour))
			c.mustComplete(done)
			c.sameRecord(c.mustRefuse(rival(a, later), later), done)
		}},
		{"TakeoverNeedsTheSamePayload", base, func(c *checker) {
			// A lapsed owner's record stays bound to its payload: a claim
			// for another payload is refused with the record, whatever
			// its own lease; one for the same payload takes it over.
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			later := c.now.Add(2 * time.Second)
			other := rival(a, later.Add(time.Minute))
			other.Fingerprint = randomHex(32)
			c.sameRecord(c.mustRefuse(other, later), a)
			same := rival(a, later.Add(time.Minute))
			if res := c.mustClaim(same, later); !res.TookOver {
				c.errorf("takeover by the same payload: TookOver = false, want true")
			}
		}},
		{"TakeoverWithoutFingerprints", base, func(c *checker) {
			// Without a fingerprint on either side there is nothing to
			// bind: a claim without one takes over a record with one, and
			// any claim takes over a record without one.
			cases := []struct{ stored, claim string }{
				{randomHex(32), ""},
				{"", randomHex(32)},
				{"", ""},
			}
			for _, tc := range cases {
				a := c.inProgress(time.Second)
				a.Fingerprint = tc.stored
				c.mustClaim(a, c.now)
				later := c.now.Add(2 * time.Second)
				b := rival(a, later.Add(time.Minute))
				b.Fingerprint = tc.claim
				if res := c.mustClaim(b, later); !res.TookOver {
					c.errorf("takeover (stored fingerprint %q, claim %q): TookOver = false, want true", tc.stored, tc.claim)
				}
			}
		}},
		{"ExpiredRecordIsAbsentForAnyPayload", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			b := rival(a, c.now.Add(3*time.Hour))
			b.Fingerprint = randomHex(32)
			c.mustClaim(b, c.now.Add(2*time.Hour))
		}},
		{"FarFutureTimes", base, func(c *checker) {
			// The wrapper's duration options saturate at 100 years, so a
			// lease end 200 years out (a lease plus a clock skew) and an
			// expiry as far must round-trip and hold.
			const century = 100 * 365 * 24 * time.Hour
			a := c.inProgress(2 * century)
			a.ExpiresAt = c.now.Add(2 * century)
			c.mustClaim(a, c.now)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(century)), a)
			done := completed(a, []byte("p-far"), c.now.Add(2*century))
			c.mustComplete(done)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(century)), done)
		}},
		{"LongestPrefix", base, func(c *checker) {
			// A record id of storage.MaxIDBytes fits
			// every store's key.
			a := c.inProgress(time.Minute)
			a.ID = strings.Repeat("p", storage.MaxIDBytes-65) + "#" + randomHex(32)
			c.mustClaim(a, c.now)
			done := completed(a, []byte("p-long"), c.now.Add(time.Hour))
			c.mustComplete(done)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), done)
			c.wantAlreadyCompleted(c.store.Release(c.ctx(), a.ID, a.Lease), "Release of the completed record")
		}},
		{"ReleaseKeepsACompletedRecord", base, func(c *checker) {
			// Release gives back a claim whose work did not complete: the
			// caller's completed record is kept (its completion landed), so
			// an unknown commit outcome can be settled by it.
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			done := completed(a, []byte("p"), c.now.Add(time.Hour))
			c.mustComplete(done)
			c.wantAlreadyCompleted(c.store.Release(c.ctx(), a.ID, a.Lease), "Release of the caller's completed record")
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Second)), done)
			c.wantLeaseLost(c.store.Release(c.ctx(), a.ID, randomHex(16)), "Release of a completed record with another lease")
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Second)), done)
		}},
		{"LeaseBoundaryIsExclusive", base, func(c *checker) {
			a := c.inProgress(1500 * time.Millisecond)
			c.mustClaim(a, c.now)
			// At exactly the lease end the owner still holds it.
			c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(1500*time.Millisecond))
			c.mustClaim(rival(a, c.now.Add(time.Minute)), c.now.Add(1501*time.Millisecond))
		}},
		{"ExpiredRecordIsAbsent", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			c.mustComplete(completed(a, []byte("p-old"), c.now.Add(time.Hour)))
			// At exactly the expiry second the record still counts.
			c.mustRefuse(rival(a, c.now.Add(2*time.Hour)), c.now.Add(time.Hour))
			res := c.mustClaim(rival(a, c.now.Add(2*time.Hour)), c.now.Add(time.Hour+time.Second))
			if res.TookOver {
				c.errorf("claim over an expired COMPLETED record reported TookOver")
			}
		}},
		{"ExpiredInProgressIsAbsent", base, func(c *checker) {
			a := c.inProgress(time.Hour)
			a.ExpiresAt = c.now.Add(time.Hour)
			c.mustClaim(a, c.now)
			c.mustClaim(rival(a, c.now.Add(3*time.Hour)), c.now.Add(2*time.Hour))
		}},
		{"BinaryDataRoundTrip", base, func(c *checker) {
			data := make([]byte, 0, 512)
			for i := range 512 {
				data = append(data, byte(i))
			}
			a := c.inProgress(time.Minute)
			a.Fingerprint = ""
			c.mustClaim(a, c.now)
			done := completed(a, data, c.now.Add(time.Hour))
			c.mustComplete(done)
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"TooLargeIsRefusedWithoutWriting", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			err := c.store.Complete(c.ctx(), completed(a, bytes.Repeat([]byte{'x'}, 500<<10), c.now.Add(time.Hour)))
			if !errors.Is(err, storage.ErrTooLarge) {
				c.fatalf("Complete of a 500 KB record: %v, want one wrapping storage.ErrTooLarge", err)
			}
			// The record is untouched and still owned, so the caller can
			// complete it without the response.
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			c.mustComplete(completed(a, []byte("n"), c.now.Add(time.Hour)))
		}},
		{"ConcurrentClaimsHaveOneWinner", base, func(c *checker) {
			base := c.inProgress(time.Minute)
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []string
				losers  []*storage.Record
				errs    []error
			)
			start := make(chan struct{})
			for range concurrency {
				rec := rival(base, base.LeaseExpiresAt)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := c.store.Claim(c.ctx(), rec, c.now)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						errs = append(errs, err)
					case res.Claimed:
						winners = append(winners, rec.Lease)
					default:
						losers = append(losers, res.Existing)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				c.fatalf("concurrent claims failed: %v", errs)
			}
			if len(winners) != 1 {
				c.fatalf("%d goroutines claimed the key, want exactly 1", len(winners))
			}
			for _, l := range losers {
				if l == nil || l.Lease != winners[0] {
					c.errorf("a refused claim saw %+v, want the winner's record (lease %s)", l, winners[0])
				}
			}
		}},
		{"StepsAreKeptByATakeoverForTheSamePayload", stepStore, func(c *checker) {
			steps := someSteps(3)
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			c.mustAppend(a, steps[0])
			c.mustAppend(a, steps[1])
			a.Steps = steps[:2]
			// A refused claim sees the steps.
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			later := c.now.Add(2 * time.Second)
			b := rival(a, later.Add(time.Second))
			b.Steps = nil
			res := c.mustClaim(b, later)
			if !res.TookOver {
				c.errorf("takeover: TookOver = false, want true")
			}
			c.wantSteps(res, steps[:2], "takeover for the same payload")
			// The new owner records the next step; the old one is fenced out.
			c.wantLeaseLost(c.steps.AppendStep(c.ctx(), a.ID, a.Lease, steps[2]), "AppendStep by the previous owner")
			c.mustAppend(b, steps[2])
			b.Steps = steps
			c.sameRecord(c.mustRefuse(rival(a, later.Add(time.Minute)), later), b)
			// Completion drops them.
			done := completed(b, []byte("p-done"), later.Add(time.Hour))
			c.mustComplete(done)
			done.Steps = nil
			c.sameRecord(c.mustRefuse(rival(a, later), later), done)
		}},
		{"StepsSurviveTakeoversWithoutNewSteps", stepStore, func(c *checker) {
			// An owner that takes over and dies before its first step must
			// not lose the steps it was handed: the next one gets them too.
			steps := someSteps(2)
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			c.mustAppend(a, steps[0])
			c.mustAppend(a, steps[1])
			t1 := c.now.Add(2 * time.Second)
			b := rival(a, t1.Add(time.Second))
			c.wantSteps(c.mustClaim(b, t1), steps, "first takeover")
			t2 := t1.Add(2 * time.Second)
			d := rival(a, t2.Add(time.Second))
			c.wantSteps(c.mustClaim(d, t2), steps, "second takeover")
		}},
		{"StepsAreDroppedForAnotherPayload", stepStore, func(c *checker) {
			// A takeover the liveness rule allows for a claim without a
			// fingerprint (or over a record without one) does not resume:
			// the steps may belong to another payload. They are gone for
			// good, also for a later claim with the first fingerprint.
			for _, tc := range []struct{ stored, claim string }{{randomHex(32), ""}, {"", randomHex(32)}} {
				a := c.inProgress(time.Second)
				a.Fingerprint = tc.stored
				c.mustClaim(a, c.now)
				c.mustAppend(a, someSteps(1)[0])
				t1 := c.now.Add(2 * time.Second)
				b := rival(a, t1.Add(time.Second))
				b.Fingerprint = tc.claim
				res := c.mustClaim(b, t1)
				if !res.TookOver {
					c.errorf("takeover (stored %q, claim %q): TookOver = false, want true", tc.stored, tc.claim)
				}
				c.wantSteps(res, nil, "takeover for another payload")
				t2 := t1.Add(2 * time.Second)
				again := rival(a, t2.Add(time.Second))
				c.wantSteps(c.mustClaim(again, t2), nil, "a later takeover with the first fingerprint")
			}
		}},
		{"ExpiryDropsSteps", stepStore, func(c *checker) {
			a := c.inProgress(time.Second)
			a.ExpiresAt = c.now.Add(time.Minute)
			c.mustClaim(a, c.now)
			c.mustAppend(a, someSteps(1)[0])
			t1 := c.now.Add(2 * time.Minute)
			b := rival(a, t1.Add(time.Second))
			b.ExpiresAt = t1.Add(time.Hour)
			c.wantSteps(c.mustClaim(b, t1), nil, "claim over an expired record")
			c.sameRecord(c.mustRefuse(rival(a, t1.Add(time.Minute)), t1), b)
			// Nor does a takeover of the new owner find the old steps.
			t2 := t1.Add(2 * time.Second)
			c.wantSteps(c.mustClaim(rival(b, t2.Add(time.Second)), t2), nil, "takeover after the expired record was replaced")
		}},
		{"AppendStepFencedByLease", stepStore, func(c *checker) {
			step := someSteps(1)[0]
			a := c.inProgress(time.Minute)
			c.wantLeaseLost(c.steps.AppendStep(c.ctx(), a.ID, a.Lease, step), "AppendStep to a missing record")
			c.mustClaim(a, c.now)
			c.wantLeaseLost(c.steps.AppendStep(c.ctx(), a.ID, randomHex(16), step), "AppendStep with another lease")
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			done := completed(a, []byte("p"), c.now.Add(time.Hour))
			c.mustComplete(done)
			c.wantLeaseLost(c.steps.AppendStep(c.ctx(), a.ID, a.Lease, step), "AppendStep to a completed record")
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"AppendStepTooLargeIsRefusedWithoutWriting", stepStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			small := someSteps(1)[0]
			c.mustAppend(a, small)
			err := c.steps.AppendStep(c.ctx(), a.ID, a.Lease, storage.Step{Name: "big", Data: bytes.Repeat([]byte{'x'}, 500<<10)})
			if !errors.Is(err, storage.ErrTooLarge) {
				c.fatalf("AppendStep of a 500 KB step: %v, want one wrapping storage.ErrTooLarge", err)
			}
			a.Steps = []storage.Step{small}
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			c.mustComplete(completed(a, []byte("n"), c.now.Add(time.Hour)))
		}},
		{"SuspendKeepsStepsAndEndsTheLease", stepStore, func(c *checker) {
			steps := someSteps(2)
			a := c.inProgress(time.Hour)
			c.mustClaim(a, c.now)
			c.mustAppend(a, steps[0])
			c.mustAppend(a, steps[1])
			end := c.now.Add(-time.Millisecond)
			if err := c.steps.Suspend(c.ctx(), a.ID, a.Lease, end); err != nil {
				c.fatalf("Suspend: %v", err)
			}
			// Another payload is refused by the suspended record, which
			// says it is suspended (idemkit inspect tells it from a crash).
			other := rival(a, c.now.Add(time.Minute))
			other.Fingerprint = randomHex(32)
			held := c.mustRefuse(other, c.now)
			if !held.Suspended {
				c.errorf("the record after Suspend: Suspended = false, want true")
			}
			b := rival(a, c.now.Add(time.Minute))
			res := c.mustClaim(b, c.now)
			if res.TookOver || !res.Resumed {
				c.errorf("claim after Suspend: TookOver = %v, Resumed = %v; want a resume (false, true)", res.TookOver, res.Resumed)
			}
			c.wantSteps(res, steps, "claim after Suspend")
			// The resumed record is the new owner's: not suspended.
			b.Steps = steps
			if got := c.mustRefuse(rival(b, c.now.Add(time.Minute)), c.now); got.Suspended {
				c.errorf("the resumed record: Suspended = true, want false")
			}
			// Its owner's completion is not suspended either.
			c.mustComplete(completed(b, []byte("r"), c.now.Add(time.Hour)))
			if got := c.mustRefuse(rival(b, c.now.Add(time.Minute)), c.now); got.Suspended {
				c.errorf("the completed record: Suspended = true, want false")
			}
		}},
		{"SuspendFencedByLease", stepStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			if err := c.steps.Suspend(c.ctx(), a.ID, a.Lease, c.now); err != nil {
				c.errorf("Suspend of a missing record: %v, want nil", err)
			}
			c.mustClaim(a, c.now)
			c.wantLeaseLost(c.steps.Suspend(c.ctx(), a.ID, randomHex(16), c.now), "Suspend with another lease")
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Second)), a)
			done := completed(a, []byte("p"), c.now.Add(time.Hour))
			c.mustComplete(done)
			c.wantAlreadyCompleted(c.steps.Suspend(c.ctx(), a.ID, a.Lease, c.now), "Suspend of the caller's completed record")
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"ForeignRecordIsNeverTakenOver", base, func(c *checker) {
			// A record of another format version (a later library's, say)
			// whose lease lapsed is not this library's to take over: the
			// claim is refused (with the record, or an error wrapping
			// ErrCorruptRecord) until the record expires, then it is replaced.
			foreign := c.inProgress(time.Second)
			foreign.Version = storage.RecordVersion + 1
			foreign.Fingerprint = ""
			c.mustClaim(foreign, c.now)
			later := c.now.Add(time.Minute)
			claim := rival(foreign, later.Add(time.Minute))
			claim.Version = storage.RecordVersion
			res, err := c.store.Claim(c.ctx(), claim, later)
			switch {
			case err != nil && !errors.Is(err, storage.ErrCorruptRecord):
				c.fatalf("claim over a lapsed foreign record: %v, want refused or an error wrapping ErrCorruptRecord", err)
			case err == nil && res.Claimed:
				c.errorf("claim over a lapsed foreign record (version %d): claimed, want refused", foreign.Version)
			case err == nil && res.Existing.Version != foreign.Version:
				c.errorf("claim over a lapsed foreign record: refused with version %d, want %d", res.Existing.Version, foreign.Version)
			}
			expired := foreign.ExpiresAt.Add(2 * time.Second)
			c.mustClaim(rival(claim, expired.Add(time.Minute)), expired)
		}},
		{"CancelledContext", base, func(c *checker) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := c.store.Claim(ctx, c.inProgress(time.Minute), c.now); err == nil {
				c.errorf("Claim with a cancelled context succeeded, want an error")
			}
		}},
	}
}
