package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Integration tests run against the server at POSTGRES_URL
// (scripts/with-postgres.sh starts one). Without POSTGRES_URL they are
// skipped, unless IDEMKIT_REQUIRE_POSTGRES=1 (set by the script, so by make)
// says a server must be there. Every test uses a table of its own, dropped
// when it ends, so tests (and packages) can share one server.

// postgresURL returns POSTGRES_URL, or skips the test.
func postgresURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("POSTGRES_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_POSTGRES") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_POSTGRES=1 but POSTGRES_URL is not set (run the tests under scripts/with-postgres.sh)")
		}
		t.Skip("POSTGRES_URL not set; run under scripts/with-postgres.sh for the PostgreSQL integration tests")
	}
	return url
}

// newPool connects to the test server, with fn applied to the pool's config.
func newPool(t testing.TB, fn func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	return newPoolAt(t, postgresURL(t), fn)
}

// newPoolAt connects to the server at url (the test server, or the pooler
// in front of it), with fn applied to the pool's config.
func newPoolAt(t testing.TB, url string, fn func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err, "the server's URL")
	if fn != nil {
		fn(cfg)
	}
	ctx := ctxT(t)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Close waits for every connection to come back: a transaction a
		// failed test left open would hang it, hiding the failure.
		closed := make(chan struct{})
		go func() { pool.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("the pool did not close in 10 s: a transaction was left open")
		}
	})
	require.NoError(t, pool.Ping(ctx), "PostgreSQL at %s:%d does not answer", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	return pool
}

// newTable returns a fresh table name, created with the store's schema, and
// drops it when the test ends.
func newTable(t testing.TB, pool pgstore.DB, optFns ...func(*pgstore.Options)) *pgstore.Store {
	t.Helper()
	table := "idemkit_test_" + randomHex(8)
	optFns = append([]func(*pgstore.Options){func(o *pgstore.Options) { o.Table = table }}, optFns...)
	store := pgstore.New(pool, optFns...)
	require.NoError(t, store.CreateTable(ctxT(t)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		o := store.Options()
		name := `"` + o.Table + `"`
		if o.Schema != "" {
			name = `"` + o.Schema + `".` + name
		}
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop table %s: %v", name, err)
		}
	})
	return store
}

// newStore returns a Store on a table of its own, and the pool under it.
func newStore(t testing.TB, optFns ...func(*pgstore.Options)) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, nil)
	return newTable(t, pool, optFns...), pool
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// liveRecord is a fresh INPROGRESS record claimed at now.
func liveRecord(now time.Time) storage.Record {
	return storage.Record{
		ID:             "itest#" + randomHex(32),
		Status:         storage.StatusInProgress,
		ExpiresAt:      now.Add(time.Hour),
		LeaseExpiresAt: now.Add(90*time.Second + 123*time.Millisecond),
		Lease:          randomHex(16),
		Fingerprint:    "fp-" + randomHex(16),
		Version:        storage.RecordVersion,
	}
}

// claimNew claims a fresh record (see liveRecord) on store at now, and
// requires the claim to succeed.
func claimNew(t testing.TB, store *pgstore.Store, now time.Time) storage.Record {
	t.Helper()
	rec := liveRecord(now)
	res, err := store.Claim(ctxT(t), rec, now)
	require.NoError(t, err)
	require.True(t, res.Claimed)
	return rec
}

// completedRecord is rec completed with data, expiring an hour after now.
func completedRecord(rec storage.Record, data []byte, now time.Time) storage.Record {
	rec.Status = storage.StatusCompleted
	rec.Data = data
	rec.ExpiresAt = now.Add(time.Hour)
	rec.LeaseExpiresAt = time.Time{}
	return rec
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
