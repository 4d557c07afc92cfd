package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
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
	storetest.RunAdmin(t, store, func(ctx context.Context, id string) error {
		// A status this package never writes.
		_, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{store.Options().Table}.Sanitize()+
			" (id, status, expires_at, lease, version) VALUES ($1, 'BROKEN', now() + interval '1 hour', 'x', 1)", id)
		return err
	})
}

// TestConformanceInEveryQueryExecMode: on a direct connection, the store
// works in every mode of pgx's (Options.QueryExecMode), not only in its
// default (TestConformance).
func TestConformanceInEveryQueryExecMode(t *testing.T) {
	t.Parallel()
	pool := newPool(t, nil)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			store := newTable(t, pool, func(o *pgstore.Options) { o.QueryExecMode = mode })
			require.Equal(t, mode, store.Options().QueryExecMode)
			storetest.Run(t, store)
			storetest.RunTx(t, store, newWrites(t, pool, mode))
		})
	}
}

// writes is storetest.TxWrites on PostgreSQL: rows of a table of their own,
// inserted in the run's transaction (pgstore.Tx); a failing write breaks
// the table's CHECK, which aborts the transaction at once. Its statements
// start with mode (pgx's query options): behind a transaction pooler, the
// handler's own statements need pgx.QueryExecModeExec too.
type writes struct {
	pool  *pgxpool.Pool
	table string
	mode  []any
}

func newWrites(t testing.TB, pool *pgxpool.Pool, mode ...any) writes {
	t.Helper()
	w := writes{pool: pool, table: "idemkit_writes_" + randomHex(8), mode: mode}
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
	_, err = ptx.Exec(ctx, `INSERT INTO `+w.table+` (name, ok) VALUES ($1, $2)`, w.args(name, !fail)...)
	// A failing write aborts the transaction; a write after it is refused
	// (25P02): both show at Commit, which reports ErrTxAborted.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (fail || pgErr.Code == "25P02") {
		return nil
	}
	return err
}

// args are a statement's arguments, after w's mode.
func (w writes) args(a ...any) []any { return append(slices.Clone(w.mode), a...) }

func (w writes) Committed(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+w.table+` WHERE name = $1)`, w.args(name)...).Scan(&ok)
	return ok, err
}
