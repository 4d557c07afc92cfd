package idemkitcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

func errorsIsCorrupt(err error) bool { return errors.Is(err, storage.ErrCorruptRecord) }

// listed is one line of list.
type listed struct {
	rec     storage.Record
	corrupt error
}

func (c *Command) list(ctx context.Context, args []string) error {
	fs := c.newFlags("list", "list --stuck | --in-progress --table T | --redis URL [--limit N] [--json]\n\n"+
		"Lists INPROGRESS records, those whose lease lapsed first (oldest lapse first). On DynamoDB this is a\n"+
		"Scan: it reads, and bills, every item of the table (half a read unit per 4 KB), whatever it lists;\n"+
		"in the composite key layout a Query of the one partition. On Redis, SCAN walks the whole database.\n"+
		"--limit stops the scan once that many records are found. Progress goes to stderr.")
	var s storeFlags
	s.register(fs)
	var stuck, inProgress, asJSON bool
	var limit int
	fs.BoolVar(&stuck, "stuck", false, "only INPROGRESS records whose lease has lapsed (owner crashed or overran; not expired)")
	fs.BoolVar(&inProgress, "in-progress", false, "every INPROGRESS record, lapsed leases first")
	fs.IntVar(&limit, "limit", 100, "stop after this many records (0: no limit)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if stuck == inProgress {
		return fmt.Errorf("%w: give --stuck or --in-progress", errUsage)
	}
	r, err := s.open(ctx)
	if err != nil {
		return err
	}
	now := c.now()
	fmt.Fprintf(c.Stderr, "idemkit: scanning %s for INPROGRESS records: this reads every item (a Scan), and is billed for it\n", r.name())
	var found []listed
	var last scanProgress
	err = r.scan(ctx, storage.StatusInProgress, func(p scanProgress) {
		last = p
		fmt.Fprintf(c.Stderr, "idemkit: page %d: %d items read, %d in progress, %.1f read units\n", p.pages, p.scanned, p.matched, p.readUnits)
	}, func(rec storage.Record, err error) bool {
		if err != nil {
			found = append(found, listed{corrupt: err})
		} else if !stuck || rec.LeaseExpiresAt.UnixMilli() < now.UnixMilli() && !rec.Expired(now) {
			found = append(found, listed{rec: rec})
		}
		return limit <= 0 || len(found) < limit
	})
	if err != nil {
		return storeError(r, err)
	}
	// Lapsed leases first, the oldest lapse first; corrupt records last.
	slices.SortStableFunc(found, func(a, b listed) int {
		if (a.corrupt != nil) != (b.corrupt != nil) {
			return map[bool]int{true: 1, false: -1}[a.corrupt != nil]
		}
		return cmp.Compare(a.rec.LeaseExpiresAt.UnixMilli(), b.rec.LeaseExpiresAt.UnixMilli())
	})
	fmt.Fprintf(c.Stderr, "idemkit: done: %d items read in %d pages, %.1f read units; %d listed\n", last.scanned, last.pages, last.readUnits, len(found))
	if asJSON {
		views := make([]view, 0, len(found))
		for _, f := range found {
			if f.corrupt != nil {
				id, raw := rawOf(f.corrupt)
				views = append(views, view{ID: id, Store: r.name(), Corrupt: f.corrupt.Error(), Raw: raw})
			} else {
				views = append(views, c.newView(r, f.rec, false))
			}
		}
		return writeJSON(c.Stdout, views)
	}
	if len(found) == 0 {
		fmt.Fprintln(c.Stdout, "no records found")
		return nil
	}
	fmt.Fprintf(c.Stdout, "%-8s %-26s %-22s %s\n", "LEASE", "LEASE END (UTC)", "EXPIRES (UTC)", "RECORD")
	for _, f := range found {
		if f.corrupt != nil {
			id, _ := rawOf(f.corrupt)
			fmt.Fprintf(c.Stdout, "%-8s %-26s %-22s %s (%v)\n", "CORRUPT", "-", "-", id, f.corrupt)
			continue
		}
		state := "live"
		switch {
		case f.rec.Expired(now):
			state = "expired"
		case f.rec.LeaseExpiresAt.UnixMilli() < now.UnixMilli():
			state = "lapsed"
		}
		fmt.Fprintf(c.Stdout, "%-8s %-26s %-22s %s\n", state, f.rec.LeaseExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z"),
			f.rec.ExpiresAt.UTC().Format(time.RFC3339), f.rec.ID)
	}
	return nil
}
