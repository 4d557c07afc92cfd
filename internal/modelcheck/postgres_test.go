package modelcheck

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

// openPostgres returns a store on a table of its own on the server at
// POSTGRES_URL, dropped when the test ends, or skips without one unless
// IDEMKIT_REQUIRE_POSTGRES=1 (set by scripts/with-postgres.sh) says it must
// be there.
func openPostgres(t *testing.T) func() storage.StepStore {
	url := os.Getenv("POSTGRES_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_POSTGRES") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_POSTGRES=1 but POSTGRES_URL is not set (run under scripts/with-postgres.sh)")
		}
		t.Skip("POSTGRES_URL is not set (run under scripts/with-postgres.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err, "POSTGRES_URL")
	require.NoError(t, pool.Ping(ctx), "PostgreSQL at POSTGRES_URL does not answer")
	var b [8]byte
	_, _ = rand.Read(b[:])
	table := "idemkit_modelcheck_" + hex.EncodeToString(b[:])
	store := pgstore.New(pool, func(o *pgstore.Options) { o.Table = table })
	require.NoError(t, store.CreateTable(ctx))
	t.Cleanup(func() {
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP TABLE "`+table+`"`); err != nil {
			t.Error(err)
		}
	})
	return func() storage.StepStore { return store }
}
