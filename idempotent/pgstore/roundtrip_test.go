package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/internal/pgtrips"
)

// countingPool is a pool of one connection whose round trips are counted
// (pgtrips.Count), and which never pings a connection it hands out.
func countingPool(t testing.TB) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	var writes *atomic.Int64
	pool := newPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		writes = pgtrips.Count(cfg)
	})
	return pool, writes
}

// TestRoundTripsPerInvocation holds the floor every store holds: a new key
// costs 2 round trips (claim, complete), a replay 1 and an in-progress
// duplicate 1 (the claim's answer carries the live record). From the first
// statement on the connection: the store sends its statements with
// pgx.QueryExecModeExec, which prepares nothing first (pgx's default mode
// would add a round trip the first time each statement runs on a
// connection).
func TestRoundTripsPerInvocation(t *testing.T) {
	t.Parallel()
	pool, writes := countingPool(t)
	store := newTable(t, pool)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	handler := func(ctx context.Context, c charge) (string, error) {
		if c.Cents < 0 {
			started <- struct{}{}
			<-release
		}
		return "ok " + c.Order, nil
	}
	h := idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(chargeKey))
	// Another process's engine: its duplicate goes to the store (in one
	// engine, a duplicate of a run in flight is answered without a call).
	other := idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(chargeKey))
	call := func(c charge) (int64, error) {
		before := writes.Load()
		_, err := h(ctxT(t), c)
		return writes.Load() - before, err
	}
	// The first statements on the connection cost what later ones do.
	n, err := call(charge{Order: "first"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "the first new key on the connection: claim, complete (nothing prepared)")
	n, err = call(charge{Order: "first"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the first replay on the connection: the claim")

	n, err = call(charge{Order: "new"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "new key: claim, complete")
	n, err = call(charge{Order: "new"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "replay: the claim")

	done := make(chan error, 1)
	go func() { _, err := other(context.Background(), charge{Order: "slow", Cents: -1}); done <- err }()
	<-started
	n, err = call(charge{Order: "slow", Cents: -1})
	require.ErrorIs(t, err, idempotent.ErrInProgress)
	assert.EqualValues(t, 1, n, "in progress: the claim")
	close(release)
	require.NoError(t, <-done)
}

// TestQueryExecModeOption: Options.QueryExecMode is how every statement of
// the store is sent. pgx.QueryExecModeCacheStatement prepares each one the
// first time it runs on a connection (one more round trip then); the
// default, and a value pgx does not define, prepare nothing.
func TestQueryExecModeOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		mode        pgx.QueryExecMode
		want        pgx.QueryExecMode
		first, then int64
	}{
		{"the default", 0, pgx.QueryExecModeExec, 2, 2},
		{"QueryExecModeCacheStatement", pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheStatement, 4, 2},
		{"a mode pgx does not define", 99, pgx.QueryExecModeExec, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, writes := countingPool(t)
			store := newTable(t, pool, func(o *pgstore.Options) { o.QueryExecMode = tc.mode })
			assert.Equal(t, tc.want, store.Options().QueryExecMode)
			h := idempotent.Wrap(idempotent.New(store), func(context.Context, charge) (string, error) { return "ok", nil },
				idempotent.WithKey(chargeKey))
			call := func(c charge) int64 {
				before := writes.Load()
				_, err := h(ctxT(t), c)
				require.NoError(t, err)
				return writes.Load() - before
			}
			assert.EqualValues(t, tc.first, call(charge{Order: "first"}), "a new key, the first on the connection")
			assert.EqualValues(t, tc.then, call(charge{Order: "then"}), "a new key")
		})
	}
}

// TestRoundTripsWithTheHandlersTransaction counts a new key whose handler
// writes one row in pgstore.Tx: claim, BEGIN, the handler's INSERT, the
// completion's UPDATE, COMMIT. The handler's INSERT is prepared by name in
// pgx's default mode (one more round trip the first time on a connection)
// and not with pgx.QueryExecModeExec (what it needs behind a pooler).
func TestRoundTripsWithTheHandlersTransaction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		mode      []any
		firstTime int64
	}{
		{"the handler's INSERT in pgx's default mode", nil, 6},
		{"the handler's INSERT with QueryExecModeExec", []any{pgx.QueryExecModeExec}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, writes := countingPool(t)
			store := newTable(t, pool)
			l := newLedger(t, pool)
			h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
				tx, err := pgstore.Tx(ctx)
				if err != nil {
					return "", err
				}
				_, err = tx.Exec(ctx, `INSERT INTO `+l.table+` (entry, cents) VALUES ($1, $2)`, append(slices.Clone(tc.mode), c.Order, c.Cents)...)
				return "ok", err
			}, idempotent.WithKey(chargeKey))
			call := func(c charge) int64 {
				before := writes.Load()
				_, err := h(ctxT(t), c)
				require.NoError(t, err)
				return writes.Load() - before
			}
			assert.EqualValues(t, tc.firstTime, call(charge{Order: "first"}), "the first time on the connection")
			assert.EqualValues(t, 5, call(charge{Order: "new"}), "claim, begin, insert, complete, commit")
		})
	}
}

// The benchmarks measure one invocation through idempotent.Wrap against the
// server at POSTGRES_URL (loopback under scripts/with-postgres.sh), with a
// no-op handler, and with a handler that inserts one ledger row: bare (its
// own transaction) and wrapped (in pgstore.Tx). The figures the docs quote
// (median, p99, the latency the check adds, against the target) are
// BENCHMARKS.md §11's (bench/pgfloor.go, make bench), not these.
//
//	scripts/with-postgres.sh go test -run '^$' -bench . -benchtime 2000x ./idempotent/pgstore/

func BenchmarkClaimNewKey(b *testing.B) {
	store, _ := newStore(b)
	h := idempotent.Wrap(idempotent.New(store), func(context.Context, charge) (string, error) { return "ok", nil },
		idempotent.WithKey(chargeKey))
	prefix := randomHex(8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h(context.Background(), charge{Order: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimReplay(b *testing.B) {
	store, _ := newStore(b)
	h := idempotent.Wrap(idempotent.New(store), func(context.Context, charge) (string, error) { return "ok", nil },
		idempotent.WithKey(chargeKey))
	if _, err := h(context.Background(), charge{Order: "same"}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h(context.Background(), charge{Order: "same"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLedgerInsertBare(b *testing.B) {
	_, pool := newStore(b)
	l := newLedger(b, pool)
	prefix := randomHex(8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.insertBare(context.Background(), fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimNewKeyWithTx(b *testing.B) {
	store, pool := newStore(b)
	l := newLedger(b, pool)
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
		return "ok", l.insert(ctx, c.Order, 1, nil)
	}, idempotent.WithKey(chargeKey))
	prefix := randomHex(8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h(context.Background(), charge{Order: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// insertBare is the handler without idemkit: its own transaction.
func (l *ledger) insertBare(ctx context.Context, entry string) error {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO `+l.table+` (entry, cents) VALUES ($1, 1)`, entry); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
