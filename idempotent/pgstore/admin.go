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

// Errors of the operator methods. Match them with errors.Is.
var (
	// ErrNotFound: no row holds the record id (it never existed, was
	// released, forgotten, or swept after it expired).
	ErrNotFound = errors.New("pgstore: no record with this id")

	// ErrChanged: Delete found the record changed since it was read (a
	// completion, a takeover, a new claim, a step, or it is gone); nothing
	// was deleted. Read it again before deciding.
	ErrChanged = errors.New("pgstore: record changed since it was read")
)

// Get reads the record id. It returns an error wrapping ErrNotFound when
// there is none, and one wrapping storage.ErrCorruptRecord when its row is
// not a record (a status or steps this package does not write). An expired
// record that is still stored is returned as it is.
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	var r row
	err := s.db.QueryRow(ctx, s.sql.get, s.opts.QueryExecMode, id).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Record{}, fmt.Errorf("pgstore: get %s: %w", id, ErrNotFound)
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

// Delete deletes the record rec.ID with one statement, on condition that it
// is still exactly as rec describes it (as Get returned it). A record that
// changed meanwhile is left alone and the error wraps ErrChanged (and
// ErrNotFound as well when it is gone). Deleting a live INPROGRESS record
// lets a duplicate run the handler while its owner may still be running:
// the caller decides that, not Delete.
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
		return fmt.Errorf("pgstore: delete %s: %w: %w", rec.ID, ErrChanged, ErrNotFound)
	}
	return fmt.Errorf("pgstore: delete %s: %w", rec.ID, ErrChanged)
}

// ScanOptions bounds and filters a Scan.
type ScanOptions struct {
	// Status, when set, keeps only records of that status: the server
	// skips the others.
	Status storage.Status
	// IDPrefix, when set, keeps only records whose id starts with it: read
	// from the primary key's range of that prefix, not the whole table.
	IDPrefix string
	// PageSize is the number of rows each query returns at most; 0 means
	// 1,000.
	PageSize int
	// Progress, when set, is called after each query.
	Progress func(ScanProgress)
}

// ScanProgress is how far a Scan has come.
type ScanProgress struct {
	// Pages is the number of queries made.
	Pages int
	// Matched is the number of rows they returned: the records of
	// ScanOptions.Status and IDPrefix read so far (rows of other statuses
	// are read by the server, and skipped there).
	Matched int64
}

// Scan calls fn with each record (in id order) until fn returns false, ctx
// ends, or the table is read. A row that does not decode is passed as an
// error wrapping storage.ErrCorruptRecord; fn decides whether to go on.
//
// Each page is one query that reads the primary key's index in id order,
// from where the last page ended, within the range of opts.IDPrefix (the
// whole table without one), and returns the next opts.PageSize rows of
// opts.Status: to find them, the server reads every row of the range up to
// the last one returned, and only the matching rows cross the network. So a
// scan of the whole table for one status reads, on the server, every row.
func (s *Store) Scan(ctx context.Context, opts ScanOptions, fn func(storage.Record, error) bool) error {
	page := opts.PageSize
	if page <= 0 {
		page = 1000
	}
	end := prefixEnd(opts.IDPrefix)
	cursor, inclusive := opts.IDPrefix, true
	var prog ScanProgress
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
