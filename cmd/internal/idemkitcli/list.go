package idemkitcli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// ofPrefix reports whether id is one idemkit derives for prefix:
// prefix#<sha256 hex>. Every id is when prefix is empty.
func ofPrefix(id, prefix string) bool {
	if prefix == "" {
		return true
	}
	hash, ok := strings.CutPrefix(id, prefix+"#")
	return ok && len(hash) == 64 && strings.Trim(hash, "0123456789abcdef") == ""
}

// listWords are list's lines on Stderr: what it reads, before it starts;
// one page read; and what it read in all. A store that reads otherwise than
// a Scan of every item, billed by the item (DynamoDB's, which a store
// without its own words gets: scanWords), says what it reads itself.
type listWords interface {
	listStart(opts storage.ScanOptions) string
	listPage(p storage.ScanProgress) string
	listDone(p storage.ScanProgress) string
}

// readUnits is a store whose Scans report the read capacity they consumed
// (dynamostore's).
type readUnits interface{ ScanReadUnits() float64 }

// scanWords are a Scan's: every item read, and billed, whatever is listed.
type scanWords struct {
	name  string
	units func() float64 // the read units consumed so far
}

func (w scanWords) listStart(storage.ScanOptions) string {
	return fmt.Sprintf("scanning %s for INPROGRESS records: this reads every item (a Scan), and is billed for it", w.name)
}

func (w scanWords) listPage(p storage.ScanProgress) string {
	return fmt.Sprintf("page %d: %d items read, %d in progress, %.1f read units", p.Pages, p.Scanned, p.Matched, w.units())
}

func (w scanWords) listDone(p storage.ScanProgress) string {
	return fmt.Sprintf("%d items read in %d pages, %.1f read units", p.Scanned, p.Pages, w.units())
}

// listed is one line of list.
type listed struct {
	rec     storage.Record
	corrupt error
}

func (c *Command) list(ctx context.Context, args []string) error {
	fs := c.newFlags("list", "list --stuck | --in-progress "+storeUsage+" [--prefix P] [--limit N] [--json]\n\n"+
		"Lists INPROGRESS records, those whose lease lapsed first (oldest lapse first). On DynamoDB this is a\n"+
		"Scan: it reads, and bills, every item of the table (half a read unit per 4 KB), whatever it lists;\n"+
		"in the composite key layout a Query of the one partition. On Redis, SCAN walks the whole database\n"+
		"(on a Redis Cluster, every primary). On PostgreSQL, queries in id order return the INPROGRESS rows\n"+
		"alone, 1,000 at a time: the server reads every row of the table to find them (with --prefix, only the\n"+
		"prefix's range of ids). --prefix keeps one function's records: on a table shared with\n"+
		"another tool (Powertools), its records would otherwise show as CORRUPT rows.\n"+
		"--limit stops the scan once that many records are found. Progress goes to stderr.")
	var s storeFlags
	s.register(fs)
	var stuck, inProgress, asJSON bool
	var limit int
	var prefix string
	fs.BoolVar(&stuck, "stuck", false, "only INPROGRESS records whose lease has lapsed (owner crashed or overran, or suspended after a handler error; not expired)")
	fs.BoolVar(&inProgress, "in-progress", false, "every INPROGRESS record, lapsed leases first")
	fs.StringVar(&prefix, "prefix", "", "only records of this key `prefix` (idempotent.WithPrefix, by default the function's name): ids PREFIX#<64 hex digits>, "+
		"as idemkit derives them; another tool's records under the same name (Powertools TypeScript's NAME#<base64 MD5>) are left out")
	fs.IntVar(&limit, "limit", 100, "stop after this many records (0: no limit)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if stuck == inProgress {
		return fmt.Errorf("%w: give --stuck or --in-progress", errUsage)
	}
	if strings.Contains(prefix, "#") {
		return fmt.Errorf("%w: --prefix is the key prefix without the # (ids are PREFIX#sha256)", errUsage)
	}
	r, err := c.open(ctx, &s)
	if err != nil {
		return err
	}
	defer func() { _ = r.close() }()
	now := c.now()
	opts := storage.ScanOptions{Status: storage.StatusInProgress}
	if prefix != "" {
		opts.IDPrefix = prefix + "#"
	}
	sw := scanWords{name: r.name(), units: func() float64 { return 0 }}
	if u, ok := r.(readUnits); ok {
		start := u.ScanReadUnits()
		sw.units = func() float64 { return u.ScanReadUnits() - start }
	}
	var words listWords = sw
	if w, ok := r.(listWords); ok {
		words = w
	}
	fmt.Fprintf(c.Stderr, "idemkit: %s\n", words.listStart(opts))
	var found []listed
	var last storage.ScanProgress
	skipped := 0
	opts.Progress = func(p storage.ScanProgress) {
		last = p
		fmt.Fprintf(c.Stderr, "idemkit: %s\n", words.listPage(p))
	}
	err = r.Scan(ctx, opts, func(rec storage.Record, err error) bool {
		id := rec.ID
		if err != nil {
			id, _ = rawOf(err)
		}
		switch {
		case !ofPrefix(id, prefix):
			skipped++
		case err != nil:
			found = append(found, listed{corrupt: err})
		case !stuck || rec.LeaseExpiresAt.UnixMilli() < now.UnixMilli() && !rec.Expired(now):
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
	other := ""
	if skipped > 0 {
		other = fmt.Sprintf(" (%d of other prefixes or tools left out)", skipped)
	}
	fmt.Fprintf(c.Stderr, "idemkit: done: %s; %d listed%s\n", words.listDone(last), len(found), other)
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
	fmt.Fprintf(c.Stdout, "%-9s %-26s %-22s %s\n", "LEASE", "LEASE END (UTC)", "EXPIRES (UTC)", "RECORD")
	for _, f := range found {
		if f.corrupt != nil {
			id, _ := rawOf(f.corrupt)
			fmt.Fprintf(c.Stdout, "%-9s %-26s %-22s %s (%v)\n", "CORRUPT", "-", "-", id, f.corrupt)
			continue
		}
		state := "live"
		switch {
		case f.rec.Expired(now):
			state = "expired"
		case f.rec.Suspended:
			state = "suspended"
		case f.rec.LeaseExpiresAt.UnixMilli() < now.UnixMilli():
			state = "lapsed"
		}
		fmt.Fprintf(c.Stdout, "%-9s %-26s %-22s %s\n", state, f.rec.LeaseExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z"),
			f.rec.ExpiresAt.UTC().Format(time.RFC3339), f.rec.ID)
	}
	return nil
}
