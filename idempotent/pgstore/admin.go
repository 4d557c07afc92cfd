package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The methods below serve set-up, scheduled jobs and tools such as the
// idemkit command, not the wrapper: they are never on an invocation's path.

// schemaSQL is schema.sql: the table and its index, for DefaultTable.
//
//go:embed schema.sql
var schemaSQL string

// tableRef matches the default names in schema.sql: the index's, then the
// table's (word boundaries: the index's name contains the table's).
var tableRef = regexp.MustCompile(`\bidempotency_records(_expires_at)?\b`)

// Schema returns the SQL that creates the Store's table and its index if
// they do not exist: schema.sql, with the table (and the index, named after
// it) of Options. Run it with a migration tool, or call CreateTable.
func (s *Store) Schema() string {
	return tableRef.ReplaceAllStringFunc(schemaSQL, func(m string) string {
		if strings.HasSuffix(m, "_expires_at") {
			// An index is named without a schema: it lives in its table's.
			return quoteIdent(s.opts.Table + "_expires_at")
		}
		return s.table
	})
}

// CreateTable creates the Store's table and its index if they do not exist
// (Schema's SQL, in one transaction). It leaves an existing table as it is:
// `idemkit check --postgres URL` verifies its columns.
func (s *Store) CreateTable(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("pgstore: create table: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Simple protocol: several statements in one Exec.
	if _, err := tx.Exec(ctx, s.Schema(), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("pgstore: create table %s: %w", s.table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: create table %s: %w", s.table, err)
	}
	return nil
}

// DeleteExpired deletes records that expired before now (expires_at <
// now, in whole seconds: the claim's rule, so only records that already
// count as absent go), the oldest first, in statements of at most batch
// rows each (batch ≤ 0 means 1,000), until none is left or ctx ends. It
// returns how many it deleted, with ctx's error if ctx ended first.
//
// PostgreSQL has no TTL: without this, expired records stay in the table
// (they count as absent, so correctness never depends on it; the table's
// size does). Run it from a scheduled job (cron, a Kubernetes CronJob, an
// EventBridge-scheduled Lambda function, or `idemkit sweep`), with a
// deadline on ctx to bound its run. Each batch is its own short statement
// and transaction, and skips rows another transaction holds (a claim
// replacing one), so it never blocks invocations for long; concurrent
// sweeps share the work.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, batch int) (int, error) {
	if batch <= 0 {
		batch = 1000
	}
	cutoff := seconds(now)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("pgstore: delete expired: %w", err)
		}
		tag, err := s.db.Exec(ctx, s.sql.deleteExpired, s.opts.QueryExecMode, cutoff, batch)
		if err != nil {
			return total, fmt.Errorf("pgstore: delete expired: %w", err)
		}
		n := int(tag.RowsAffected())
		total += n
		if n < batch {
			return total, nil
		}
	}
}

var _ storage.AdminStore = (*Store)(nil)

// Get reads the record id, as storage.AdminStore says. A row that is not a
// record (a status or steps this package does not write) is a
// *storage.CorruptRecordError without Fields. An expired record that no
// sweep has deleted yet is returned as it is.
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	var r row
	err := s.db.QueryRow(ctx, s.sql.get, s.opts.QueryExecMode, id).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Record{}, fmt.Errorf("pgstore: get %s: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Record{}, fmt.Errorf("pgstore: get %s: %w", id, err)
	}
	rec, err := r.record(id)
	if err != nil {
		return storage.Record{}, fmt.Errorf("pgstore: get: %w", err)
	}
	return rec, nil
}

// Delete deletes the record rec.ID as storage.AdminStore says, with one
// statement that compares every column (the response's data too).
func (s *Store) Delete(ctx context.Context, rec storage.Record) error {
	names := make([]string, len(rec.Steps))
	data := make([][]byte, len(rec.Steps))
	for i, st := range rec.Steps {
		names[i], data[i] = st.Name, st.Data
		if data[i] == nil {
			data[i] = []byte{}
		}
	}
	var done, exists bool
	err := s.db.QueryRow(ctx, s.sql.deleteAsRead, s.opts.QueryExecMode, rec.ID, string(rec.Status), seconds(rec.ExpiresAt), millis(rec.LeaseExpiresAt),
		rec.Lease, rec.Fingerprint, nullBytes(rec.Data), int32(rec.Version), names, data, rec.Suspended).Scan(&done, &exists)
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: delete %s: %w", rec.ID, err)
	case done:
		return nil
	case !exists:
		return fmt.Errorf("pgstore: delete %s: %w: %w", rec.ID, storage.ErrChanged, storage.ErrNotFound)
	}
	return fmt.Errorf("pgstore: delete %s: %w", rec.ID, storage.ErrChanged)
}

// Scan passes the records opts selects to fn in id order, as
// storage.AdminStore says. Progress is reported after each query, before
// its rows are passed; Scanned and Matched both count the rows the queries
// returned.
//
// Each page is one query that reads the primary key's index in id order,
// from where the last page ended, within the range of opts.IDPrefix (the
// whole table without one), and returns the next Options.ScanPageSize rows
// of opts.Status: to find them, the server reads every row of the range up to
// the last one returned, and only the matching rows cross the network. So a
// scan of the whole table for one status reads, on the server, every row.
func (s *Store) Scan(ctx context.Context, opts storage.ScanOptions, fn func(storage.Record, error) bool) error {
	page := s.opts.ScanPageSize
	end := prefixEnd(opts.IDPrefix)
	cursor, inclusive := opts.IDPrefix, true
	var prog storage.ScanProgress
	for {
		rows, err := s.db.Query(ctx, s.sql.scan, s.opts.QueryExecMode, cursor, inclusive, end, string(opts.Status), page)
		if err != nil {
			return fmt.Errorf("pgstore: scan: %w", err)
		}
		var recs []storage.Record
		var errs []error
		n := 0
		for rows.Next() {
			var id string
			var r row
			if err := rows.Scan(append([]any{&id}, r.dest()...)...); err != nil {
				rows.Close()
				return fmt.Errorf("pgstore: scan: %w", err)
			}
			n++
			cursor, inclusive = id, false
			if !strings.HasPrefix(id, opts.IDPrefix) {
				break // past the prefix's range of the key (a prefix prefixEnd cannot bound)
			}
			rec, err := r.record(id)
			recs, errs = append(recs, rec), append(errs, err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pgstore: scan: %w", err)
		}
		prog.Pages++
		prog.Scanned += int64(len(recs))
		prog.Matched += int64(len(recs))
		if opts.Progress != nil {
			opts.Progress(prog)
		}
		for i := range recs {
			if !fn(recs[i], errs[i]) {
				return nil
			}
		}
		if n < page || len(recs) < n {
			return nil
		}
	}
}

// prefixEnd is the least string above every string that starts with
// prefix, in the byte order of the id column (COLLATE "C"): prefix with its
// last byte incremented. It is "" (no bound) for an empty prefix, and for
// one that ends in a byte of 0x7f or above, whose successor would not be
// valid UTF-8 text; Scan then stops at the first id past the prefix
// instead. idemkit's prefixes end in "#".
func prefixEnd(prefix string) string {
	if prefix == "" || prefix[len(prefix)-1] >= 0x7f {
		return ""
	}
	return prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
}
