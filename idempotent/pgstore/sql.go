package pgstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The store's statements are fixed SQL with $n parameters; only the table's
// quoted name (Options.Schema, Options.Table) is put in when the Store is
// built. Every operation is one statement, so one round trip, run by
// PostgreSQL atomically; the ones that may refuse to write also read, in the
// same statement, what refused them.

// defaultExecMode is Options.QueryExecMode's default: how the store sends
// each of its statements, as the first argument of every Exec, Query and
// QueryRow it makes, so that it holds for the store's statements alone,
// whatever the pool's DefaultQueryExecMode.
//
// pgx's default, QueryExecModeCacheStatement, prepares a statement by name
// on the connection and executes it by name later. Behind a pooler in
// transaction mode (PgBouncer's pool_mode = transaction, RDS Proxy) the
// connection is a client connection of the pooler, and each transaction
// (each statement outside one) runs on whichever server connection is free:
// the name is missing on the next one (SQLSTATE 26000), or another client
// connection's statement of the same name is there already (42P05).
// QueryExecModeExec sends the SQL, the parameters and the execution in one
// message, on the unnamed statement: one round trip every time, even on a
// fresh connection (no Prepare first), and nothing that needs the same server
// connection afterwards. The parameters' types come from the statement (each
// is cast, or compared with a column); values travel in the text format.
// The price: the server parses and plans each statement every time
// (Options.QueryExecMode says how much, and how a direct connection avoids
// it).
const defaultExecMode = pgx.QueryExecModeExec

// columns are the record's columns, in the order decodeRow reads them.
const columns = "status, expires_at, lease_expires_at, lease, fingerprint, data, version, step_names, step_data, suspended, trace"

// recordVersion is storage.RecordVersion as an SQL literal: the only format
// a claim takes over.
var recordVersion = strconv.Itoa(storage.RecordVersion)

// replaceableOn is storage.Record.Replaceable on the stored row r, for a
// claim with fingerprint fp at now ($9 truncated to seconds, $10 to
// milliseconds). A NULL lease end compares as not lapsed: an INPROGRESS
// record without one is never taken over.
func replaceableOn(fp string) string {
	return `r.expires_at < $9 OR (r.status = 'INPROGRESS' AND r.version = ` + recordVersion + ` AND r.lease <> '' ` +
		`AND r.lease_expires_at < $10 AND (r.fingerprint = '' OR ` + fp + ` = '' OR r.fingerprint = ` + fp + `))`
}

// resumableOn is storage.Record.Resumable on the stored row r, for a claim
// with fingerprint fp at now ($9, seconds).
func resumableOn(fp string) string {
	return `r.status = 'INPROGRESS' AND r.expires_at >= $9 AND r.fingerprint = ` + fp
}

// replaceable and resumable are Claim's rules, for its fingerprint $6.
var (
	replaceable = replaceableOn("$6")
	resumable   = resumableOn("$6")
)

// claimSQL is Store.Claim's one statement. Parameters: $1 id, $2 status, $3
// expires_at, $4 lease_expires_at, $5 lease, $6 fingerprint, $7 data, $8
// version, $9 now (seconds), $10 now (milliseconds).
//
//   - old locks the stored row (FOR UPDATE), so that it is the latest
//     version (READ COMMITTED: a locking read waits for a concurrent writer
//     and reads what it committed) and stays so until the statement's
//     transaction ends: what the claim decides on is what it replaces, and
//     what a refused claim returns is the live record.
//   - claim inserts the new record, or, on a conflict, replaces the stored
//     one where the liveness rule allows (keeping its steps where the claim
//     resumes it). Its source reads old, which makes old run first; it
//     writes nothing over a record with the caller's own lease (a claim
//     retried after a lost response: the record is the caller's already).
//   - The outer SELECT returns one row: whether claim wrote (with the steps
//     it kept, and whether it updated a row rather than inserting one: xmax
//     is set on a row an upsert updated), and the old row.
//
// old finds nothing when the key's row was inserted by a transaction that
// committed after the statement began (it is not in the statement's
// snapshot); claim then meets that row as a conflict. If the claim is
// refused there, no row explains why, and Store.Claim runs the statement
// again (a new snapshot sees the row).
func claimSQL(table string) string {
	return `WITH old AS (
	SELECT ` + columns + ` FROM ` + table + ` WHERE id = $1 FOR UPDATE
), claim AS (
	INSERT INTO ` + table + ` AS r (id, status, expires_at, lease_expires_at, lease, fingerprint, data, version, step_names, step_data, suspended)
	SELECT $1::text, $2::text, $3::timestamptz, $4::timestamptz, $5::text, $6::text, $7::bytea, $8::integer, '{}', '{}', false
	WHERE NOT EXISTS (SELECT FROM old WHERE old.lease = $5)
	ON CONFLICT (id) DO UPDATE SET
		status = excluded.status, expires_at = excluded.expires_at, lease_expires_at = excluded.lease_expires_at,
		lease = excluded.lease, fingerprint = excluded.fingerprint, data = excluded.data, version = excluded.version,
		step_names = CASE WHEN ` + resumable + ` THEN r.step_names ELSE '{}' END,
		step_data = CASE WHEN ` + resumable + ` THEN r.step_data ELSE '{}' END,
		suspended = false, trace = NULL
	WHERE ` + replaceable + `
	RETURNING r.step_names, r.step_data, r.xmax::text <> '0' AS updated
)
SELECT claim.step_names IS NOT NULL, claim.step_names, claim.step_data, coalesce(claim.updated, false),
	old.status IS NOT NULL, ` + prefixed("old.", columns) + `
FROM (VALUES (1)) AS one (x) LEFT JOIN old ON true LEFT JOIN claim ON true`
}

// claimManySQL is Store.ClaimMany's one statement: Claim's rules for many
// records at once, their fields in arrays of one element per record
// (unnested in order, numbered n from 1). Parameters: $1 ids, $2 statuses,
// $3 expires_at, $4 lease_expires_at (NULL elements for none), $5 leases,
// $6 fingerprints, $7 data (NULL elements for none), $8 versions, each an
// array; $9 now (seconds), $10 now (milliseconds), as claimSQL's. The ids
// are distinct (ClaimMany refuses duplicates).
//
//   - old locks the stored rows of the records' ids, in id order, as
//     claimSQL's old does: each is the latest version, and stays so until
//     the statement ends.
//   - replaced overwrites each of those rows the liveness rule lets its
//     claim replace (on the claim's own fingerprint), keeping its steps
//     where the claim resumes it; never one with the claim's own lease. It
//     waits for no lock: old holds them all.
//   - inserted inserts the records old found no row for, in id order. A row
//     there after all (inserted by a transaction the statement's snapshot
//     does not see) is left alone (DO NOTHING): its claim is decided by the
//     next statement, whose snapshot sees it, and Store.ClaimMany sends one
//     for such records (claimSQL decides on it at once, with DO UPDATE).
//   - The outer SELECT returns one row per record, in order: whether it was
//     claimed, the steps it kept, whether it replaced a row, and the old row.
//
// So the statement waits for a row lock only in old, where every call
// takes its locks in the same order, and for another transaction's insert
// of a key only in inserted, in the same order again: two calls over the
// same keys wait for each other and never deadlock (claimSQL's DO UPDATE,
// which locks a row it meets in its insert, would: a row one call's old saw
// and another's did not).
func claimManySQL(table string) string {
	return `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[], $7::bytea[], $8::integer[])
		WITH ORDINALITY AS i (id, status, expires_at, lease_expires_at, lease, fingerprint, data, version, n)
), old AS MATERIALIZED (
	SELECT i.n, ` + prefixed("r.", columns) + ` FROM input AS i JOIN ` + table + ` AS r ON r.id = i.id ORDER BY r.id FOR UPDATE OF r
), replaced AS (
	UPDATE ` + table + ` AS r SET
		status = i.status, expires_at = i.expires_at, lease_expires_at = i.lease_expires_at,
		lease = i.lease, fingerprint = i.fingerprint, data = i.data, version = i.version,
		step_names = CASE WHEN ` + resumableOn("i.fingerprint") + ` THEN r.step_names ELSE '{}' END,
		step_data = CASE WHEN ` + resumableOn("i.fingerprint") + ` THEN r.step_data ELSE '{}' END,
		suspended = false, trace = NULL
	FROM input AS i
	WHERE r.id = i.id AND r.lease <> i.lease AND (` + replaceableOn("i.fingerprint") + `)
		AND EXISTS (SELECT FROM old WHERE old.n = i.n)
	RETURNING i.n, r.step_names, r.step_data
), inserted AS (
	INSERT INTO ` + table + ` (id, status, expires_at, lease_expires_at, lease, fingerprint, data, version, step_names, step_data, suspended)
	SELECT i.id, i.status, i.expires_at, i.lease_expires_at, i.lease, i.fingerprint, i.data, i.version, '{}', '{}', false
	FROM input AS i WHERE NOT EXISTS (SELECT FROM old WHERE old.n = i.n)
	ORDER BY i.id COLLATE "C"
	ON CONFLICT (id) DO NOTHING
	RETURNING id
)
SELECT i.n, replaced.n IS NOT NULL OR inserted.id IS NOT NULL, replaced.step_names, replaced.step_data, replaced.n IS NOT NULL,
	old.n IS NOT NULL, ` + prefixed("old.", columns) + `
FROM input AS i LEFT JOIN old ON old.n = i.n LEFT JOIN replaced ON replaced.n = i.n LEFT JOIN inserted ON inserted.id = i.id
ORDER BY i.n`
}

// fencedResult is the tail of the fenced writes' statements: whether the
// write happened (done), and, from the statement's snapshot, the row's
// status and whether it carries the caller's lease $2 (NULL, NULL: no row).
// It only explains a write that did not happen, for the error message and
// to tell "gone" from "lost", so a concurrent change it cannot see is
// harmless.
func fencedResult(table string) string {
	return `SELECT EXISTS (SELECT FROM done), cur.status, cur.lease = $2
FROM (VALUES (1)) AS one (x) LEFT JOIN (SELECT status, lease FROM ` + table + ` WHERE id = $1) AS cur ON true`
}

// completeSQL is Store.Complete's statement (and Tx.Commit's, in the
// handler's transaction): fenced by the lease alone, so a retried
// completion succeeds again. $1 id, $2 lease, $3 status, $4 data (NULL for
// none), $5 expires_at, $6 trace (NULL for none).
func completeSQL(table string) string {
	return `WITH done AS (
	UPDATE ` + table + ` SET status = $3, data = $4, expires_at = $5, lease_expires_at = NULL,
		step_names = '{}', step_data = '{}', suspended = false, trace = $6
	WHERE id = $1 AND lease = $2 RETURNING 1
)
` + fencedResult(table)
}

// releaseSQL is Store.Release's statement: the caller's record, while in
// progress. $1 id, $2 lease.
func releaseSQL(table string) string {
	return `WITH done AS (DELETE FROM ` + table + ` WHERE id = $1 AND lease = $2 AND status = 'INPROGRESS' RETURNING 1)
` + fencedResult(table)
}

// suspendSQL is Store.Suspend's statement. $1 id, $2 lease, $3 lease end.
func suspendSQL(table string) string {
	return `WITH done AS (
	UPDATE ` + table + ` SET lease_expires_at = $3, suspended = true
	WHERE id = $1 AND lease = $2 AND status = 'INPROGRESS' RETURNING 1
)
` + fencedResult(table)
}

// fixedBytes is what a record's size counts for its fixed-width columns:
// two timestamps, the version and the suspended flag.
const fixedBytes = 8 + 8 + 4 + 1

// sizeExpr is a row's size as recordSize counts it, in SQL (21 is
// fixedBytes; TestSizeExprMatchesRecordSize holds them together).
const sizeExpr = `octet_length(id) + octet_length(status) + octet_length(lease) + octet_length(fingerprint) + ` +
	`coalesce(octet_length(data), 0) + coalesce(octet_length(trace), 0) + (SELECT coalesce(sum(octet_length(n)), 0) FROM unnest(step_names) AS n) + ` +
	`(SELECT coalesce(sum(octet_length(d)), 0) FROM unnest(step_data) AS d) + ` + "21"

// appendStepSQL is Store.AppendStep's statement: the step is appended if
// the record is INPROGRESS, carries the lease and fits with it. $1 id, $2
// lease, $3 name, $4 data, $5 the step's size, $6 the limit. Its result
// adds the row's size (from the snapshot) to fencedResult's.
func appendStepSQL(table string) string {
	return `WITH done AS (
	UPDATE ` + table + ` SET step_names = step_names || $3::text, step_data = step_data || $4::bytea
	WHERE id = $1 AND lease = $2 AND status = 'INPROGRESS' AND ` + sizeExpr + ` + $5::bigint <= $6::bigint RETURNING 1
)
SELECT EXISTS (SELECT FROM done), cur.status, cur.lease = $2, cur.size
FROM (VALUES (1)) AS one (x) LEFT JOIN (SELECT status, lease, ` + sizeExpr + ` AS size FROM ` + table + ` WHERE id = $1) AS cur ON true`
}

// deleteExpiredSQL deletes up to $2 records expired at $1 (whole seconds),
// the oldest first, skipping rows another transaction holds (a claim
// replacing one): one short statement per batch, so a sweep never holds
// many locks for long.
func deleteExpiredSQL(table string) string {
	return `DELETE FROM ` + table + ` WHERE expires_at < $1 AND id IN (
	SELECT id FROM ` + table + ` WHERE expires_at < $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
)`
}

// prefixed puts p before each of the comma-separated names.
func prefixed(p, names string) string {
	parts := strings.Split(names, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}

// quoteIdent quotes an SQL identifier (pgx.Identifier.Sanitize does the
// same; written out here so that the statements are plain strings).
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, "\x00", ""), `"`, `""`) + `"`
}

// statements holds a Store's statements, built once in New.
type statements struct {
	claim, claimMany, complete, release, suspend, appendStep, deleteExpired string
	completeMany, releaseMany                                               string
	get, deleteAsRead, scan                                                 string
}

func newStatements(table string) statements {
	return statements{
		claim:         claimSQL(table),
		claimMany:     claimManySQL(table),
		completeMany:  completeManySQL(table),
		releaseMany:   releaseManySQL(table),
		complete:      completeSQL(table),
		release:       releaseSQL(table),
		suspend:       suspendSQL(table),
		appendStep:    appendStepSQL(table),
		deleteExpired: deleteExpiredSQL(table),
		get:           `SELECT ` + columns + ` FROM ` + table + ` WHERE id = $1`,
		deleteAsRead: fmt.Sprintf(`WITH done AS (
	DELETE FROM %[1]s WHERE id = $1 AND status = $2 AND expires_at = $3 AND lease_expires_at IS NOT DISTINCT FROM $4
		AND lease = $5 AND fingerprint = $6 AND data IS NOT DISTINCT FROM $7 AND version = $8
		AND step_names = $9 AND step_data = $10 AND suspended = $11
	RETURNING 1
)
SELECT EXISTS (SELECT FROM done), EXISTS (SELECT FROM %[1]s WHERE id = $1)`, table),
		// $1 the cursor, $2 whether the cursor's own row is in, $3 the end
		// of the prefix's range ('' for none), $4 the status ('' for any),
		// $5 the page size. Every condition on id is an AND of ranges, so
		// the index scan starts at the cursor and stops at the range's end
		// (the values are the statement's own: each is planned with them).
		scan: `SELECT id, ` + columns + ` FROM ` + table + `
WHERE id >= $1 AND ($2 OR id <> $1) AND ($3 = '' OR id < $3) AND ($4 = '' OR status = $4) ORDER BY id LIMIT $5`,
	}
}
