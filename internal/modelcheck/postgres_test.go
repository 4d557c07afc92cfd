package modelcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

// openPostgres returns a store on a table of its own on the server at
// POSTGRES_URL, with the writes of its transactions in a second table, both
// dropped when the test ends, or skips without one unless
// IDEMKIT_REQUIRE_POSTGRES=1 (set by scripts/with-postgres.sh) says it must
// be there.
func openPostgres(t *testing.T) func() (storage.StepStore, storetest.TxWrites) {
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
	writes := pgWrites{pool: pool, table: table + "_writes"}
	_, err = pool.Exec(ctx, `CREATE TABLE "`+writes.table+`" (name text PRIMARY KEY, ok boolean NOT NULL CHECK (ok))`)
	require.NoError(t, err)
	t.Cleanup(func() {
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP TABLE "`+table+`", "`+writes.table+`"`); err != nil {
			t.Error(err)
		}
	})
	return func() (storage.StepStore, storetest.TxWrites) { return store, writes }
}

// pgWrites writes rows of a table of its own in a pgstore transaction; a
// failing write breaks the table's CHECK, which aborts the transaction.
type pgWrites struct {
	pool  *pgxpool.Pool
	table string
}

func (w pgWrites) Add(ctx context.Context, tx storage.Tx, name string, fail bool) error {
	ptx, err := pgstore.Tx(storage.ContextWithTx(ctx, txOpener{tx}))
	if err != nil {
		return err
	}
	_, err = ptx.Exec(ctx, `INSERT INTO "`+w.table+`" (name, ok) VALUES ($1, $2)`, name, !fail)
	// A failing write aborts the transaction; a write after it is refused
	// (25P02): both show at Commit, which reports ErrTxAborted.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (fail || pgErr.Code == "25P02") {
		return nil
	}
	return err
}

func (w pgWrites) Committed(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM "`+w.table+`" WHERE name = $1)`, name).Scan(&ok)
	return ok, err
}

// txOpener hands a begun storage.Tx to pgstore.Tx, as the engine does.
type txOpener struct{ tx storage.Tx }

func (o txOpener) OpenTx(context.Context) (storage.Tx, error) { return o.tx, nil }
