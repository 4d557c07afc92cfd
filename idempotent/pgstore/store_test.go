package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	storetest.Run(t, store)
	storetest.RunTx(t, store, newWrites(t, pool))
}

// writes is storetest.TxWrites on PostgreSQL: rows of a table of their own,
// inserted in the run's transaction (pgstore.Tx); a failing write breaks
// the table's CHECK, which aborts the transaction at once.
type writes struct {
	pool  *pgxpool.Pool
	table string
}

func newWrites(t testing.TB, pool *pgxpool.Pool) writes {
	t.Helper()
	w := writes{pool: pool, table: "idemkit_writes_" + randomHex(8)}
	_, err := pool.Exec(ctxT(t), `CREATE TABLE `+w.table+` (name text PRIMARY KEY, ok boolean NOT NULL CHECK (ok))`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE `+w.table) })
	return w
}

func (w writes) Add(ctx context.Context, tx storage.Tx, name string, fail bool) error {
	ptx, err := pgstore.Tx(storage.ContextWithTx(ctx, opener{tx}))
	if err != nil {
		return err
	}
	_, err = ptx.Exec(ctx, `INSERT INTO `+w.table+` (name, ok) VALUES ($1, $2)`, name, !fail)
	// A failing write aborts the transaction; a write after it is refused
	// (25P02): both show at Commit, which reports ErrTxAborted.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (fail || pgErr.Code == "25P02") {
		return nil
	}
	return err
}

func (w writes) Committed(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+w.table+` WHERE name = $1)`, name).Scan(&ok)
	return ok, err
}
