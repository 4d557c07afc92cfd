package idemkitcli_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/cmd/internal/idemkitcli"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// postgresURL returns POSTGRES_URL, or skips (fails under IDEMKIT_REQUIRE_POSTGRES=1).
func postgresURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("POSTGRES_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_POSTGRES") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_POSTGRES=1 but POSTGRES_URL is not set")
		}
		t.Skip("POSTGRES_URL not set; run under scripts/with-postgres.sh")
	}
	return url
}

// poolerURL returns POSTGRES_POOLER_URL, a pooler in transaction mode in
// front of the server at POSTGRES_URL (scripts/with-pgbouncer.sh starts a
// PgBouncer), or skips (fails under IDEMKIT_REQUIRE_PGBOUNCER=1).
func poolerURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("POSTGRES_POOLER_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_PGBOUNCER") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_PGBOUNCER=1 but POSTGRES_POOLER_URL is not set")
		}
		t.Skip("POSTGRES_POOLER_URL not set; run under scripts/with-postgres.sh scripts/with-pgbouncer.sh")
	}
	return url
}

// pgSchema creates a schema of the test's own on the server at url, dropped
// when the test ends, and returns its name and a pool on the server.
func pgSchema(t *testing.T, url string) (string, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "idemkit_cmd_" + hex.EncodeToString(b[:])
	_, err = pool.Exec(t.Context(), "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	})
	return schema, pool
}

// seedPostgres creates the records table in a schema of its own (pgSchema) and
// seeds it (seed), directly on the server; it returns the store and the
// records.
func seedPostgres(t *testing.T, url string, now time.Time) (string, *pgxpool.Pool, *pgstore.Store, seeded) {
	t.Helper()
	schema, pool := pgSchema(t, url)
	store := pgstore.New(pool, func(o *pgstore.Options) { o.Schema, o.Table = schema, "records" })
	require.NoError(t, store.CreateTable(t.Context()))
	return schema, pool, store, seed(t, store, now)
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	url := postgresURL(t)
	schema, pool := pgSchema(t, url)
	flags := []string{"--postgres", url, "--postgres-table", schema + ".records"}
	now := time.Now()

	// check before the table exists: the fix is to create it.
	r := run(t, now, append([]string{"check"}, flags...)...)
	assert.Equal(t, idemkitcli.ExitCheck, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "FAIL the table does not exist")

	store := pgstore.New(pool, func(o *pgstore.Options) { o.Schema, o.Table = schema, "records" })
	require.NoError(t, store.CreateTable(t.Context()))
	recs := seed(t, store, now)
	storeTests(t, flags, recs, now.Add(time.Minute))

	r = run(t, now, append([]string{"check"}, flags...)...)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, want := range []string{"ok   PostgreSQL ", "ok   columns: the 12 of schema.sql", "ok   primary key (id)",
		"ok   an index on expires_at", "note 0 expired records", "schedule `idemkit sweep`"} {
		assert.Contains(t, r.stdout, want)
	}
	var left int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".records").Scan(&left))
	require.Positive(t, left, "storeTests leaves records")
	r = run(t, now.Add(2*time.Hour), append([]string{"check"}, flags...)...)
	assert.Contains(t, r.stdout, fmt.Sprintf("note %d expired records", left), "two hours on, every record left has expired")

	// sweep: nothing expired now; everything two hours on.
	r = run(t, now, append([]string{"sweep"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "deleted 0 expired records")
	r = run(t, now.Add(2*time.Hour), append([]string{"sweep", "--batch", "1"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, fmt.Sprintf("deleted %d expired records", left))
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".records").Scan(&left))
	assert.Zero(t, left, "swept")

	// A column of the wrong type.
	_, err := pool.Exec(t.Context(), "ALTER TABLE "+schema+".records ALTER COLUMN version TYPE bigint")
	require.NoError(t, err)
	r = run(t, now, append([]string{"check"}, flags...)...)
	assert.Equal(t, idemkitcli.ExitCheck, r.code)
	assert.Contains(t, r.stdout, "version (bigint, want integer)")

	// Usage errors.
	r = run(t, now, "sweep", "--table", "t")
	assert.Equal(t, idemkitcli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "sweep is for PostgreSQL")
	oneLine(t, r)
	r = run(t, now, "list", "--stuck", "--postgres", url, "--redis", "redis://x")
	assert.Equal(t, idemkitcli.ExitUsage, r.code)
	r = run(t, now, "inspect", "--id", "x#1", "--postgres", url, "--postgres-table", schema+".missing")
	assert.Equal(t, idemkitcli.ExitFailed, r.code)
	assert.Contains(t, r.stderr, "the table does not exist")
	oneLine(t, r)
}

// TestPostgresSaysWhatItReads: on PostgreSQL, list and inspect say what
// PostgreSQL does (queries that return the INPROGRESS rows alone; no TTL,
// a sweep), not what DynamoDB does (a Scan of every item, billed in read
// units; TTL).
func TestPostgresSaysWhatItReads(t *testing.T) {
	t.Parallel()
	url := postgresURL(t)
	now := time.Now()
	schema, pool, _, recs := seedPostgres(t, url, now)
	flags := []string{"--postgres", url, "--postgres-table", schema + ".records"}
	with := func(args ...string) []string { return append(args, flags...) }
	later := now.Add(time.Minute)
	dynamoWords := []string{"Scan", "billed", "read units", "items", "TTL"}

	var rows int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".records").Scan(&rows))
	require.Equal(t, 4, rows, "seed writes 4 records, 3 of them INPROGRESS")
	tests := []struct {
		name        string
		args        []string
		at          time.Time
		code        int
		stdout      []string
		stderr      []string
		notInStdout []string
		notInStderr []string
	}{
		{
			name: "list reads the INPROGRESS rows, in queries", args: with("list", "--in-progress"), at: later,
			stderr: []string{
				"idemkit: reading the INPROGRESS rows of PostgreSQL table " + schema + ".records",
				"in id order, 1000 per query: the server reads every row of the table to find them, and sends only those",
				"idemkit: query 1: 3 INPROGRESS rows so far\n",
				"idemkit: done: 3 INPROGRESS rows in 1 query; 3 listed\n",
			},
			notInStderr: dynamoWords,
			stdout:      []string{recs.live.ID, recs.lapsed.ID, recs.suspended.ID},
			notInStdout: []string{recs.done.ID},
		},
		{
			name: "list --prefix reads the prefix's range of ids", args: with("list", "--stuck", "--prefix", "payments"), at: later,
			stderr: []string{
				`the server reads every row whose id starts with "payments#" (that range of the primary key) to find them`,
				"idemkit: done: 3 INPROGRESS rows in 1 query; 2 listed\n",
			},
			notInStderr: dynamoWords,
			stdout:      []string{recs.lapsed.ID, recs.suspended.ID},
			notInStdout: []string{recs.live.ID},
		},
		{
			name: "an expired record waits for the sweep", args: with("inspect", "--id", recs.done.ID), at: now.Add(2 * time.Hour),
			stdout: []string{"EXPIRED, no longer counts; it stays in the table until a sweep deletes it " +
				"(PostgreSQL has no TTL: `idemkit sweep`, or pgstore's Store.DeleteExpired)"},
			notInStdout: []string{"TTL would have", "DynamoDB"},
		},
		{
			name: "no record: a sweep, not TTL, deletes expired ones", args: with("inspect", "--prefix", "payments", "--key", "never"),
			at: later, code: idemkitcli.ExitNotFound,
			stderr:      []string{"(never written, released after a failure, forgotten, or deleted by a sweep after it expired)"},
			notInStderr: []string{"TTL"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.at, tc.args...)
			require.Equal(t, tc.code, r.code, r.stdout+r.stderr)
			for _, want := range tc.stdout {
				assert.Contains(t, r.stdout, want)
			}
			for _, want := range tc.stderr {
				assert.Contains(t, r.stderr, want)
			}
			for _, not := range tc.notInStdout {
				assert.NotContains(t, r.stdout, not)
			}
			for _, not := range tc.notInStderr {
				assert.NotContains(t, r.stderr, not)
			}
		})
	}
}

// TestPostgresBehindAPooler runs every command with --postgres through a
// pooler in transaction mode (POSTGRES_POOLER_URL): the records seeded
// directly, then inspected, listed, forgotten, checked and swept through
// the pooler, whose server connections change under each statement.
func TestPostgresBehindAPooler(t *testing.T) {
	t.Parallel()
	pooled := poolerURL(t)
	now := time.Now()
	schema, pool, store, recs := seedPostgres(t, postgresURL(t), now)
	flags := []string{"--postgres", pooled, "--postgres-table", schema + ".records"}
	with := func(args ...string) []string { return append(args, flags...) }

	// More completed records, each inspected through the pooler by a
	// command of its own (a new process: a new connection each time).
	var done []storage.Record
	for i := range 6 {
		rec := storage.Record{ID: idempotent.RecordID("payments", "", fmt.Sprintf("more-%d", i)), Status: storage.StatusInProgress,
			ExpiresAt: now.Add(time.Hour), LeaseExpiresAt: now.Add(time.Minute), Lease: fmt.Sprintf("lease-more-%d", i),
			Fingerprint: "fp", Version: storage.RecordVersion}
		res, err := store.Claim(t.Context(), rec, now)
		require.NoError(t, err)
		require.True(t, res.Claimed)
		rec.Status, rec.Data, rec.LeaseExpiresAt = storage.StatusCompleted, deflated(t, httpResponse), time.Time{}
		require.NoError(t, store.Complete(t.Context(), rec))
		done = append(done, rec)
	}
	for _, rec := range done {
		r := run(t, now, with("inspect", "--id", rec.ID, "--show-response")...)
		require.Equal(t, 0, r.code, "%s: %s", rec.ID, r.stderr)
		assert.Contains(t, r.stdout, "status   COMPLETED")
		assert.Contains(t, r.stdout, "HTTP 201")
	}

	storeTests(t, flags, recs, now.Add(time.Minute))

	r := run(t, now, with("check")...)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, want := range []string{"ok   PostgreSQL ", "ok   columns: the 12 of schema.sql", "ok   primary key (id)",
		"ok   an index on expires_at", "note 0 expired records"} {
		assert.Contains(t, r.stdout, want)
	}
	var left int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".records").Scan(&left))
	require.Positive(t, left)
	r = run(t, now.Add(2*time.Hour), with("sweep", "--batch", "2")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, fmt.Sprintf("deleted %d expired records", left))
	r = run(t, now.Add(2*time.Hour), with("list", "--in-progress")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no records found\n", r.stdout)
}
