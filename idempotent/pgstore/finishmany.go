package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var _ storage.FinishManyStore = (*Store)(nil)

// lockedInOrder is the many statements' locked: the stored rows of input's
// ids, locked in id order as claimManySQL's old locks them, so that calls
// over the same keys (claims, completions, releases) wait for each other
// and never deadlock. The write that follows waits for no lock of another
// call's: it writes only rows locked holds.
func lockedInOrder(table string) string {
	return `locked AS MATERIALIZED (
	SELECT i.n FROM input AS i JOIN ` + table + ` AS r ON r.id = i.id ORDER BY r.id FOR UPDATE OF r
)`
}

// fencedManyResult is the many statements' tail, fencedResult for each
// record: its number, whether the write happened, and, from the
// statement's snapshot, the row's status and whether it carries the
// record's lease (NULL, NULL: no row), in the records' order.
func fencedManyResult(table string) string {
	return `SELECT i.n, done.n IS NOT NULL, cur.status, cur.lease = i.lease
FROM input AS i LEFT JOIN done ON done.n = i.n LEFT JOIN ` + table + ` AS cur ON cur.id = i.id
ORDER BY i.n`
}

// completeManySQL is Store.CompleteMany's one statement: completeSQL for
// many records at once, their fields in arrays of one element per record
// (unnested in order, numbered n from 1). Parameters: $1 ids, $2 leases,
// $3 statuses, $4 data (NULL elements for none), $5 expires_at, $6 traces
// (NULL elements for none). The ids are
// distinct (CompleteMany refuses duplicates). Each row is written on
// completeSQL's condition alone (the lease), re-checked on the row's latest
// version when another transaction changed it meanwhile, as completeSQL's
// UPDATE does.
func completeManySQL(table string) string {
	return `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::timestamptz[], $6::text[])
		WITH ORDINALITY AS i (id, lease, status, data, expires_at, trace, n)
), ` + lockedInOrder(table) + `, done AS (
	UPDATE ` + table + ` AS r SET status = i.status, data = i.data, expires_at = i.expires_at, lease_expires_at = NULL,
		step_names = '{}', step_data = '{}', suspended = false, trace = i.trace
	FROM input AS i
	WHERE r.id = i.id AND r.lease = i.lease AND EXISTS (SELECT FROM locked WHERE locked.n = i.n)
	RETURNING i.n
)
` + fencedManyResult(table)
}

// releaseManySQL is Store.ReleaseMany's one statement: releaseSQL for many
// records at once. Parameters: $1 ids, $2 leases, as completeManySQL's.
func releaseManySQL(table string) string {
	return `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i (id, lease, n)
), ` + lockedInOrder(table) + `, done AS (
	DELETE FROM ` + table + ` AS r USING input AS i
	WHERE r.id = i.id AND r.lease = i.lease AND r.status = 'INPROGRESS' AND EXISTS (SELECT FROM locked WHERE locked.n = i.n)
	RETURNING i.n
)
` + fencedManyResult(table)
}

// CompleteMany implements storage.FinishManyStore with one statement for
// every record (completeManySQL): any number of records costs one round
// trip. Each record is decided by Complete's rule (the stored record
// carries its lease) in the same atomic operation as its write, and its
// error is the one Complete would return. Calls over the same keys never
// deadlock: they lock the keys' rows in one order, ClaimMany's.
//
// A record larger than Options.MaxItemBytes fails alone with an error
// wrapping storage.ErrTooLarge, and one whose ID, lease, status or trace
// PostgreSQL's text cannot hold with ErrInvalidText, before the statement,
// which does not carry them.
func (s *Store) CompleteMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := checkMany(ctx, "complete many", recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	errs := make([]error, len(recs))
	pending := make([]int, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		err := s.checkComplete(r)
		if err == nil {
			err = checkTexts("record id", r.ID, "lease", r.Lease, "status", string(r.Status), "trace", r.Trace)
		}
		if err != nil {
			errs[i] = fmt.Errorf("pgstore: complete: %w", err)
			continue
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return errs, nil
	}
	n := len(pending)
	ids, leases, statuses := make([]string, n), make([]string, n), make([]string, n)
	data, expires, traces := make([][]byte, n), make([]time.Time, n), make([]*string, n)
	for j, i := range pending {
		r := &recs[i]
		ids[j], leases[j], statuses[j] = r.ID, r.Lease, string(r.Status)
		data[j], expires[j], traces[j] = nullBytes(r.Data), seconds(r.ExpiresAt), nullText(r.Trace)
	}
	answers, err := s.fencedMany(ctx, s.sql.completeMany, n, ids, leases, statuses, data, expires, traces)
	if err != nil {
		return nil, fmt.Errorf("pgstore: complete many: %w", err)
	}
	for j, a := range answers {
		if !a.done {
			errs[pending[j]] = fenced("complete", a.status, a.ourRow)
		}
	}
	return errs, nil
}

// ReleaseMany implements storage.FinishManyStore with one statement for
// every record (releaseManySQL), as CompleteMany: one round trip for any
// number of records, each decided by Release's rule (the stored record
// carries its lease and is INPROGRESS; a record already gone is no error).
// A record the statement found its caller's and in progress but could not
// delete changed while the statement waited for its lock: it is read again,
// as Release reads it, the one round trip more, for that record only. A
// record whose ID or lease PostgreSQL's text cannot hold fails alone, with
// ErrInvalidText, before the statement.
func (s *Store) ReleaseMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := checkMany(ctx, "release many", recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	errs := make([]error, len(recs))
	pending := make([]int, 0, len(recs))
	for i := range recs {
		if err := checkTexts("record id", recs[i].ID, "lease", recs[i].Lease); err != nil {
			errs[i] = fmt.Errorf("pgstore: release: %w", err)
			continue
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return errs, nil
	}
	n := len(pending)
	ids, leases := make([]string, n), make([]string, n)
	for j, i := range pending {
		ids[j], leases[j] = recs[i].ID, recs[i].Lease
	}
	answers, err := s.fencedMany(ctx, s.sql.releaseMany, n, ids, leases)
	if err != nil {
		return nil, fmt.Errorf("pgstore: release many: %w", err)
	}
	for j, a := range answers {
		if a.done || a.status == nil {
			continue
		}
		r := &recs[pending[j]]
		errs[pending[j]] = s.notGivenBack(ctx, "release", r.ID, r.Lease, a.status, a.ourRow)
	}
	return errs, nil
}

// checkMany is what a many call checks before it sends anything: an ended
// ctx and duplicate IDs fail it whole.
func checkMany(ctx context.Context, op string, recs []storage.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return nil
}

// checkTexts is checkText of each pair of what and value in pairs: the
// text fields of a record the many statements carry, any of which
// PostgreSQL would refuse for the whole statement.
func checkTexts(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkText(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// fencedAnswer is what a many statement answered for one record (see
// fencedManyResult).
type fencedAnswer struct {
	done   bool
	status *string
	ourRow *bool
}

// fencedMany runs the many statement sql with args, for n records, and
// returns each record's answer, in order.
func (s *Store) fencedMany(ctx context.Context, sql string, n int, args ...any) ([]fencedAnswer, error) {
	rows, err := s.db.Query(ctx, sql, append([]any{s.opts.QueryExecMode}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	answers := make([]fencedAnswer, n)
	seen := 0
	for rows.Next() {
		var (
			num int64
			a   fencedAnswer
		)
		if err := rows.Scan(&num, &a.done, &a.status, &a.ourRow); err != nil {
			return nil, err
		}
		if num != int64(seen)+1 || seen >= n {
			return nil, fmt.Errorf("the statement answered for record %d of %d after %d answers", num, n, seen)
		}
		answers[seen] = a
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if seen != n {
		return nil, fmt.Errorf("the statement answered for %d records of %d", seen, n)
	}
	return answers, nil
}
