package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// RunAdmin checks the corrupt records of an AdminStore: Get and Scan report
// a record that does not decode as a *storage.CorruptRecordError naming
// its id, Claim fails on it with an error wrapping storage.ErrCorruptRecord,
// and a storage.ClaimManyStore's ClaimMany fails that record's claim alone. corrupt writes, under id, something the store cannot read as a
// record (a damaged item, a key of the wrong type, a row of an unknown
// status), bypassing the store. Run holds the other cases of AdminStore.
// Like Run, RunAdmin makes each case a subtest of a *testing.T.
func RunAdmin(t testing.TB, store storage.AdminStore, corrupt func(ctx context.Context, id string) error) {
	t.Helper()
	if corrupt == nil {
		t.Fatal("storetest: RunAdmin: nil corrupt function")
	}
	cs := corruptCases(corrupt)
	run(t, store, cs, nil)
}

// adminRecord returns a fresh INPROGRESS record under prefix.
func (c *checker) adminRecord(prefix string, lease time.Duration) storage.Record {
	r := c.inProgress(lease)
	r.ID = prefix + randomHex(32)
	return r
}

// mustGet reads id, which must hold a readable record.
func (c *checker) mustGet(id string) storage.Record {
	c.Helper()
	rec, err := c.admin.Get(c.ctx(), id)
	if err != nil {
		c.fatalf("Get(%s): %v", id, err)
	}
	return rec
}

// wantNotFound checks that Get of id finds no record.
func (c *checker) wantNotFound(id, what string) {
	c.Helper()
	if _, err := c.admin.Get(c.ctx(), id); !errors.Is(err, storage.ErrNotFound) {
		c.errorf("%s: Get(%s): error %v, want one wrapping storage.ErrNotFound", what, id, err)
	}
}

// scan collects what Scan passes: records by id, corrupt records' errors,
// the calls of fn and the last progress.
type scanned struct {
	recs    map[string]storage.Record
	corrupt []*storage.CorruptRecordError
	calls   int
	last    *storage.ScanProgress
}

func (c *checker) scan(opts storage.ScanOptions, stopAfter int) scanned {
	c.Helper()
	s := scanned{recs: map[string]storage.Record{}}
	opts.Progress = func(p storage.ScanProgress) { s.last = &p }
	err := c.admin.Scan(c.ctx(), opts, func(rec storage.Record, err error) bool {
		s.calls++
		var ce *storage.CorruptRecordError
		switch {
		case errors.As(err, &ce) && errors.Is(err, storage.ErrCorruptRecord):
			s.corrupt = append(s.corrupt, ce)
		case err != nil:
			c.errorf("Scan passed an error that is no *storage.CorruptRecordError matching storage.ErrCorruptRecord: %v", err)
		default:
			s.recs[rec.ID] = rec
		}
		return stopAfter == 0 || s.calls < stopAfter
	})
	if err != nil {
		c.fatalf("Scan(%+v): %v", opts, err)
	}
	return s
}

// adminCases are the cases of storage.AdminStore, run by Run on one.
func adminCases() []testCase {
	return []testCase{
		{"AdminGet", adminStore, func(c *checker) {
			c.wantNotFound("storetest#"+randomHex(32), "a record never written")
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			got := c.mustGet(a.ID)
			c.sameRecord(&got, a)
			if c.steps != nil {
				a.Steps = someSteps(2)
				for _, st := range a.Steps {
					c.mustAppend(a, st)
				}
				got = c.mustGet(a.ID)
				c.sameRecord(&got, a)
			}
			done := completed(a, []byte(`p{"ok":true}`), c.now.Add(time.Hour))
			c.mustComplete(done)
			done.Steps = nil
			got = c.mustGet(a.ID)
			c.sameRecord(&got, done)
		}},
		{"AdminDeleteAsRead", adminStore, func(c *checker) {
			for _, status := range []storage.Status{storage.StatusInProgress, storage.StatusCompleted} {
				a := c.inProgress(time.Minute)
				c.mustClaim(a, c.now)
				if status == storage.StatusCompleted {
					c.mustComplete(completed(a, []byte("p1"), c.now.Add(time.Hour)))
				}
				if err := c.admin.Delete(c.ctx(), c.mustGet(a.ID)); err != nil {
					c.fatalf("Delete(%s) of the %s record as read: %v", a.ID, status, err)
				}
				c.wantNotFound(a.ID, "after Delete")
				if res := c.mustClaim(rival(a, c.now.Add(time.Minute)), c.now); res.TookOver || res.Resumed {
					c.errorf("a claim after Delete reported TookOver=%v Resumed=%v, want a new record", res.TookOver, res.Resumed)
				}
			}
		}},
		{"AdminDeleteChanged", adminStore, func(c *checker) {
			// Each change since the read leaves the record to Delete, which
			// reports ErrChanged (not ErrNotFound: the record is there).
			changes := []struct {
				name   string
				steps  bool // needs a StepStore
				change func(a storage.Record) storage.Record
			}{
				{"completed", false, func(a storage.Record) storage.Record {
					done := completed(a, []byte("p-done"), c.now.Add(time.Hour))
					c.mustComplete(done)
					done.Steps = nil // Complete drops them
					return done
				}},
				{"taken over", false, func(a storage.Record) storage.Record {
					b := rival(a, c.now.Add(time.Hour)) // for the same payload: a StepStore keeps the steps
					c.mustClaim(b, a.LeaseExpiresAt.Add(time.Second))
					return b
				}},
				{"released and claimed anew", false, func(a storage.Record) storage.Record {
					if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
						c.fatalf("Release(%s): %v", a.ID, err)
					}
					b := rival(a, c.now.Add(time.Minute))
					c.mustClaim(b, c.now)
					b.Steps = nil // a new record's
					return b
				}},
				{"a step finished", true, func(a storage.Record) storage.Record {
					st := storage.Step{Name: "ship", Data: []byte("1")}
					c.mustAppend(a, st)
					a.Steps = append(a.Steps, st)
					return a
				}},
				{"suspended", true, func(a storage.Record) storage.Record {
					end := c.now.Add(-time.Second)
					if err := c.steps.Suspend(c.ctx(), a.ID, a.Lease, end); err != nil {
						c.fatalf("Suspend(%s): %v", a.ID, err)
					}
					a.LeaseExpiresAt, a.Suspended = end, true
					return a
				}},
			}
			for _, ch := range changes {
				if ch.steps && c.steps == nil {
					continue
				}
				a := c.inProgress(time.Second)
				c.mustClaim(a, c.now)
				if c.steps != nil {
					a.Steps = someSteps(1)
					c.mustAppend(a, a.Steps[0])
				}
				read := c.mustGet(a.ID)
				now := ch.change(a)
				err := c.admin.Delete(c.ctx(), read)
				if !errors.Is(err, storage.ErrChanged) || errors.Is(err, storage.ErrNotFound) {
					c.errorf("%s: Delete as read before: error %v, want one wrapping storage.ErrChanged and not storage.ErrNotFound", ch.name, err)
				}
				got := c.mustGet(a.ID)
				c.sameRecord(&got, now)
				if err := c.admin.Delete(c.ctx(), got); err != nil {
					c.errorf("%s: Delete as read again: %v", ch.name, err)
				}
			}
		}},
		{"AdminDeleteGone", adminStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			read := c.mustGet(a.ID)
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release(%s): %v", a.ID, err)
			}
			err := c.admin.Delete(c.ctx(), read)
			if !errors.Is(err, storage.ErrChanged) || !errors.Is(err, storage.ErrNotFound) {
				c.errorf("Delete of a record gone since the read: error %v, want one wrapping storage.ErrChanged and storage.ErrNotFound", err)
			}
		}},
		{"AdminScan", adminStore, func(c *checker) {
			prefix := "storetest-scan-" + randomHex(8) + "#"
			want := map[string]storage.Record{}
			inProgress := map[string]bool{}
			for i := range 5 {
				a := c.adminRecord(prefix, time.Minute)
				c.mustClaim(a, c.now)
				if i%2 == 0 {
					a = completed(a, []byte("p{}"), c.now.Add(time.Hour))
					c.mustComplete(a)
				} else {
					inProgress[a.ID] = true
				}
				want[a.ID] = a
			}
			other := c.adminRecord("storetest-scan-"+randomHex(8)+"#", time.Minute)
			c.mustClaim(other, c.now) // of another prefix: never passed
			for _, tt := range []struct {
				name   string
				status storage.Status
			}{{"every status", ""}, {"INPROGRESS", storage.StatusInProgress}} {
				s := c.scan(storage.ScanOptions{IDPrefix: prefix, Status: tt.status}, 0)
				n := 0
				for id, w := range want {
					if tt.status != "" && !inProgress[id] {
						if _, ok := s.recs[id]; ok {
							c.errorf("%s: Scan passed %s, of another status", tt.name, id)
						}
						continue
					}
					n++
					got, ok := s.recs[id]
					if !ok {
						c.errorf("%s: Scan did not pass %s", tt.name, id)
						continue
					}
					c.sameRecord(&got, w)
				}
				if len(s.recs) != n || len(s.corrupt) > 0 {
					c.errorf("%s: Scan passed %d records and %d corrupt ones, want the %d of the prefix", tt.name, len(s.recs), len(s.corrupt), n)
				}
				switch p := s.last; {
				case p == nil:
					c.errorf("%s: Progress was never called", tt.name)
				case p.Pages < 1 || p.Matched < int64(n) || p.Scanned < p.Matched:
					c.errorf("%s: last progress %+v, want at least a page and %d matched, no more matched than scanned", tt.name, *p, n)
				}
			}
			if s := c.scan(storage.ScanOptions{IDPrefix: prefix}, 2); s.calls != 2 {
				c.errorf("Scan called fn %d times after it returned false on the 2nd call, want 2", s.calls)
			}
		}},
	}
}

// corruptCases are RunAdmin's.
func corruptCases(corrupt func(ctx context.Context, id string) error) []testCase {
	plant := func(c *checker, prefix string) string {
		c.Helper()
		id := prefix + randomHex(32)
		if err := corrupt(c.ctx(), id); err != nil {
			c.fatalf("writing the corrupt record %s: %v", id, err)
		}
		return id
	}
	return []testCase{
		claimManyCorruptCase(plant),
		{"AdminGetCorrupt", adminStore, func(c *checker) {
			id := plant(c, "storetest#")
			_, err := c.admin.Get(c.ctx(), id)
			var ce *storage.CorruptRecordError
			switch {
			case !errors.Is(err, storage.ErrCorruptRecord) || !errors.As(err, &ce):
				c.errorf("Get of a corrupt record: error %v, want a *storage.CorruptRecordError matching storage.ErrCorruptRecord", err)
			case ce.ID != id:
				c.errorf("CorruptRecordError.ID = %q, want %q", ce.ID, id)
			case errors.Is(err, storage.ErrNotFound):
				c.errorf("Get of a corrupt record: %v matches storage.ErrNotFound", err)
			}
		}},
		{"AdminScanCorrupt", adminStore, func(c *checker) {
			prefix := "storetest-corrupt-" + randomHex(8) + "#"
			good := c.adminRecord(prefix, time.Minute)
			c.mustClaim(good, c.now)
			bad := plant(c, prefix)
			s := c.scan(storage.ScanOptions{IDPrefix: prefix}, 0)
			if _, ok := s.recs[good.ID]; !ok || len(s.recs) != 1 {
				c.errorf("Scan passed %d readable records, want %s alone", len(s.recs), good.ID)
			}
			if len(s.corrupt) != 1 || s.corrupt[0].ID != bad {
				c.errorf("Scan passed corrupt records %v, want %s alone", s.corrupt, bad)
			}
		}},
	}
}
