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
	"github.com/idemkit/idemkit/idempotent/pgstore"
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

func TestPostgres(t *testing.T) {
	t.Parallel()
	url := postgresURL(t)
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
	for _, want := range []string{"ok   PostgreSQL ", "ok   columns: the 11 of schema.sql", "ok   primary key (id)",
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
	_, err = pool.Exec(t.Context(), "ALTER TABLE "+schema+".records ALTER COLUMN version TYPE bigint")
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
