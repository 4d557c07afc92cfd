package pgstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

// Behind a connection pooler in transaction mode: POSTGRES_POOLER_URL, a
// PgBouncer with pool_mode = transaction in front of the server at
// POSTGRES_URL (scripts/with-pgbouncer.sh starts one). Without it these
// tests are skipped, unless IDEMKIT_REQUIRE_PGBOUNCER=1 (set by the script,
// so by make) says a pooler must be there.
//
// Such a pooler hands each transaction, and each statement outside one, to
// whichever server connection is free. A statement pgx prepared by name on
// one server connection (its default mode, QueryExecModeCacheStatement) is
// then missing on the next (SQLSTATE 26000), or a new client connection
// finds its name taken (42P05). The store sends each of its statements with
// pgx.QueryExecModeExec instead, so every pool works with its default
// configuration, in one round trip.

// poolerURL returns POSTGRES_POOLER_URL, or skips the test.
func poolerURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("POSTGRES_POOLER_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_PGBOUNCER") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_PGBOUNCER=1 but POSTGRES_POOLER_URL is not set (run the tests under scripts/with-pgbouncer.sh)")
		}
		t.Skip("POSTGRES_POOLER_URL not set; run under scripts/with-postgres.sh scripts/with-pgbouncer.sh for the pooler tests")
	}
	return url
}

// ownDatabase creates a database of the test's own on the test server,
// dropped when the test ends, and returns its name. The pooler keeps one
// pool of server connections per database and user: in a database of its
// own, a test knows which server connection the pooler hands out next (the
// one last released: PgBouncer reuses them last in, first out), because no
// other test's statements take it.
func ownDatabase(t testing.TB) string {
	t.Helper()
	admin := newPool(t, nil)
	db := "idemkit_pooler_" + randomHex(6)
	_, err := admin.Exec(ctxT(t), "CREATE DATABASE "+db)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: the pooler still holds server connections to it.
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
	})
	return db
}

// inDatabase makes a pool's connections use database db, then applies fns.
func inDatabase(db string, fns ...func(*pgxpool.Config)) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Database = db
		for _, fn := range fns {
			fn(cfg)
		}
	}
}

// holdServerConn makes another client of the pooler take, in a transaction
// that lasts until the test ends, the server connection the pooler hands
// out next: the one the last statement ran on. The next statement of any
// other client then runs on another server connection.
func holdServerConn(t *testing.T, other *pgxpool.Pool) {
	t.Helper()
	tx, err := other.Begin(ctxT(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctxT(t), "SELECT 1") // no arguments: the simple protocol, nothing prepared
	require.NoError(t, err)
}

// binary is a bytea value with every byte, NUL and 0xff among them.
func binary() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestEveryStatementBehindAPooler runs each of the store's statements twice
// through the pooler, on a pool with pgx's default configuration: the second
// time on another server connection than the first, which a statement
// prepared by name the first time would not find there. Each statement's
// preconditions are written directly, so that only the statement under test
// goes through the pooler.
func TestEveryStatementBehindAPooler(t *testing.T) {
	t.Parallel()
	pooled := poolerURL(t)
	db := ownDatabase(t)
	setup := newTable(t, newPool(t, inDatabase(db)))
	table := setup.Options().Table
	now := time.Now()
	ctx := ctxT(t)
	withStep := func(t *testing.T) storage.Record {
		t.Helper()
		rec := claimNew(t, setup, now)
		require.NoError(t, setup.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "charge", Data: binary()}))
		rec.Steps = []storage.Step{{Name: "charge", Data: binary()}}
		return rec
	}
	tests := []struct {
		name string
		op   func(t *testing.T, s *pgstore.Store) error
	}{
		{"claim a new key", func(t *testing.T, s *pgstore.Store) error {
			res, err := s.Claim(ctx, liveRecord(now), now)
			if err == nil && !res.Claimed {
				return errors.New("not claimed")
			}
			return err
		}},
		{"claim a live key: the stored record, its steps (text[], bytea[]) too", func(t *testing.T, s *pgstore.Store) error {
			rec := withStep(t)
			dup := liveRecord(now)
			dup.ID, dup.Fingerprint = rec.ID, rec.Fingerprint
			res, err := s.Claim(ctx, dup, now)
			if err != nil {
				return err
			}
			require.NotNil(t, res.Existing, "refused: the live record comes back")
			assert.Equal(t, rec.Steps, res.Existing.Steps)
			assert.Equal(t, rec.Lease, res.Existing.Lease)
			return nil
		}},
		{"claim a lapsed key: a resume keeps its steps", func(t *testing.T, s *pgstore.Store) error {
			rec := withStep(t)
			require.NoError(t, setup.Suspend(ctx, rec.ID, rec.Lease, now))
			later := now.Add(time.Second)
			next := liveRecord(later)
			next.ID, next.Fingerprint = rec.ID, rec.Fingerprint
			res, err := s.Claim(ctx, next, later)
			if err != nil {
				return err
			}
			assert.True(t, res.Claimed && res.Resumed, "%+v", res)
			assert.Equal(t, rec.Steps, res.Steps)
			return nil
		}},
		{"complete with a binary response (bytea)", func(t *testing.T, s *pgstore.Store) error {
			rec := claimNew(t, setup, now)
			if err := s.Complete(ctx, completedRecord(rec, binary(), now)); err != nil {
				return err
			}
			got, err := setup.Get(ctx, rec.ID)
			require.NoError(t, err)
			assert.Equal(t, binary(), got.Data)
			return nil
		}},
		{"release", func(t *testing.T, s *pgstore.Store) error {
			rec := claimNew(t, setup, now)
			return s.Release(ctx, rec.ID, rec.Lease)
		}},
		{"append a step (text and bytea onto arrays)", func(t *testing.T, s *pgstore.Store) error {
			rec := claimNew(t, setup, now)
			return s.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "charge", Data: binary()})
		}},
		{"suspend", func(t *testing.T, s *pgstore.Store) error {
			rec := claimNew(t, setup, now)
			return s.Suspend(ctx, rec.ID, rec.Lease, now)
		}},
		{"get", func(t *testing.T, s *pgstore.Store) error {
			rec := withStep(t)
			got, err := s.Get(ctx, rec.ID)
			if err != nil {
				return err
			}
			assert.Equal(t, rec.Steps, got.Steps)
			assert.Equal(t, rec.LeaseExpiresAt.UnixMilli(), got.LeaseExpiresAt.UnixMilli())
			return nil
		}},
		{"delete as read (text[] and bytea[] parameters)", func(t *testing.T, s *pgstore.Store) error {
			rec := withStep(t)
			got, err := setup.Get(ctx, rec.ID)
			require.NoError(t, err)
			return s.Delete(ctx, got)
		}},
		{"scan", func(t *testing.T, s *pgstore.Store) error {
			rec := withStep(t)
			found := false
			err := s.Scan(ctx, storage.ScanOptions{Status: storage.StatusInProgress, IDPrefix: rec.ID}, func(r storage.Record, err error) bool {
				require.NoError(t, err)
				found = found || r.ID == rec.ID
				return true
			})
			assert.True(t, found)
			return err
		}},
		{"delete expired", func(t *testing.T, s *pgstore.Store) error {
			claimNew(t, setup, now)
			n, err := s.DeleteExpired(ctx, now.Add(2*time.Hour), 1000)
			assert.Positive(t, n)
			return err
		}},
		{"the completion in the handler's transaction (pgstore.Tx)", func(t *testing.T, s *pgstore.Store) error {
			rec := claimNew(t, setup, now)
			tx, err := s.BeginTx(ctx, rec.ID, rec.Lease)
			if err != nil {
				return err
			}
			return tx.Commit(ctx, completedRecord(rec, binary(), now))
		}},
		{"create the table", func(t *testing.T, s *pgstore.Store) error { return s.CreateTable(ctx) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// pgx's default configuration; used by one goroutine, so one
			// client connection.
			client := newPoolAt(t, pooled, inDatabase(db))
			other := newPoolAt(t, pooled, inDatabase(db))
			s := pgstore.New(client, func(o *pgstore.Options) { o.Table = table })
			require.NoError(t, tc.op(t, s), "the first time")
			holdServerConn(t, other)
			require.NoError(t, tc.op(t, s), "again, on another server connection")
		})
	}
}

// TestEveryStatementChoosesExecMode holds every statement the store sends,
// the ones a future change adds too, to pgx.QueryExecModeExec: the
// conformance suite and the operator methods run on a DB that records any
// statement sent otherwise (pgx's default mode would prepare it by name).
// An Exec without arguments, and QueryExecModeSimpleProtocol, prepare
// nothing either.
func TestEveryStatementChoosesExecMode(t *testing.T) {
	t.Parallel()
	pool := newPool(t, nil)
	db := &modeCheckingDB{pool: pool}
	store := newTable(t, db)
	storetest.Run(t, store)
	storetest.RunTx(t, store, newWrites(t, pool, pgx.QueryExecModeExec))
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	got, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)
	require.NoError(t, store.Scan(ctx, storage.ScanOptions{IDPrefix: "itest#"}, func(storage.Record, error) bool { return true }))
	require.NoError(t, store.Delete(ctx, got))
	_, err = store.DeleteExpired(ctx, now.Add(48*time.Hour), 100)
	require.NoError(t, err)
	require.NoError(t, store.CreateTable(ctx))

	db.mu.Lock()
	defer db.mu.Unlock()
	assert.Empty(t, slices.Sorted(maps.Keys(db.unprepared)), "statements sent without pgx.QueryExecModeExec: they fail behind a transaction pooler")
	assert.NotZero(t, db.checked)
}

// modeCheckingDB is a pgstore.DB over pool that records each statement whose
// first argument does not choose an execution mode that prepares nothing.
type modeCheckingDB struct {
	pool *pgxpool.Pool

	mu         sync.Mutex
	checked    int
	unprepared map[string]bool // the statements' first 100 characters, spaces collapsed
}

func (d *modeCheckingDB) check(sql string, args []any, exec bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checked++
	if len(args) == 0 && exec {
		return // pgx sends an Exec without arguments with the simple protocol
	}
	if len(args) > 0 && (args[0] == pgx.QueryExecModeExec || args[0] == pgx.QueryExecModeSimpleProtocol) {
		return
	}
	sql = strings.Join(strings.Fields(sql), " ")
	if d.unprepared == nil {
		d.unprepared = map[string]bool{}
	}
	d.unprepared[sql[:min(len(sql), 100)]] = true
}

func (d *modeCheckingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.check(sql, args, true)
	return d.pool.Exec(ctx, sql, args...)
}

func (d *modeCheckingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	d.check(sql, args, false)
	return d.pool.Query(ctx, sql, args...)
}

func (d *modeCheckingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	d.check(sql, args, false)
	return d.pool.QueryRow(ctx, sql, args...)
}

func (d *modeCheckingDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := d.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return modeCheckingTx{Tx: tx, db: d}, nil
}

// modeCheckingTx checks the statements of a transaction the store began:
// its completion, and the handler's own (pgstore.Tx).
type modeCheckingTx struct {
	pgx.Tx
	db *modeCheckingDB
}

func (t modeCheckingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.db.check(sql, args, true)
	return t.Tx.Exec(ctx, sql, args...)
}

func (t modeCheckingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t.db.check(sql, args, false)
	return t.Tx.Query(ctx, sql, args...)
}

func (t modeCheckingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t.db.check(sql, args, false)
	return t.Tx.QueryRow(ctx, sql, args...)
}

// TestConformanceBehindAPooler runs the conformance suite on a store whose
// pool connects through the pooler with pgx's default configuration. The
// suite's own writes in the run's transaction (writes.Add) pass
// pgx.QueryExecModeExec, as a handler's statements must there.
func TestConformanceBehindAPooler(t *testing.T) {
	t.Parallel()
	pool := newPoolAt(t, poolerURL(t), nil)
	store := newTable(t, pool)
	storetest.Run(t, store)
	storetest.RunTx(t, store, newWrites(t, pool, pgx.QueryExecModeExec))
}

// TestWrapBehindAPooler: duplicates arriving at once, at several processes
// (an engine and a pool of pgx's default configuration each), through the
// pooler. Every key's handler runs exactly once; every other request gets
// its replay or idempotent.ErrInProgress; nothing fails otherwise. With the
// handler writing its row in pgstore.Tx, each key's row commits once.
func TestWrapBehindAPooler(t *testing.T) {
	t.Parallel()
	pooled := poolerURL(t)
	const (
		processes  = 4
		rounds     = 4
		keys       = 8 // per round
		duplicates = 4 // requests per key, at once: keys × duplicates goroutines
	)
	for _, tc := range []struct {
		name  string
		useTx bool
	}{
		{"a handler without SQL", false},
		{"a handler that writes its row in pgstore.Tx", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pools := make([]*pgxpool.Pool, processes)
			for i := range pools {
				pools[i] = newPoolAt(t, pooled, nil)
			}
			table := newTable(t, pools[0]).Options().Table
			l := newLedger(t, newPool(t, nil)) // read directly: entries' query is prepared by name
			var mu sync.Mutex
			runs := map[string]int{}
			handler := func(ctx context.Context, c charge) (string, error) {
				mu.Lock()
				runs[c.Order]++
				mu.Unlock()
				if tc.useTx {
					tx, err := pgstore.Tx(ctx)
					if err != nil {
						return "", err
					}
					if _, err := tx.Exec(ctx, `INSERT INTO `+l.table+` (entry, cents) VALUES ($1, $2)`,
						pgx.QueryExecModeExec, c.Order, c.Cents); err != nil {
						return "", err
					}
				}
				time.Sleep(20 * time.Millisecond) // long enough for duplicates to find it in progress
				return "charged " + c.Order, nil
			}
			hs := make([]func(context.Context, charge) (string, error), processes)
			for i := range hs {
				store := pgstore.New(pools[i], func(o *pgstore.Options) { o.Table = table })
				hs[i] = idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(chargeKey))
			}

			var (
				all                         []string
				replayed, inProgress, total int
				failures                    = map[string]int{} // SQLSTATE (or the error) -> count
				firstErr                    error
			)
			for round := range rounds {
				start := make(chan struct{})
				var wg sync.WaitGroup
				var rmu sync.Mutex
				outs := map[string]int{}
				for k := range keys {
					key := fmt.Sprintf("round %d key %d %s", round, k, randomHex(4))
					all = append(all, key)
					for d := range duplicates {
						wg.Add(1)
						go func(h func(context.Context, charge) (string, error)) {
							defer wg.Done()
							<-start
							out, err := h(ctxT(t), charge{Order: key, Cents: 1})
							rmu.Lock()
							defer rmu.Unlock()
							total++
							var pgErr *pgconn.PgError
							switch {
							case err == nil && out == "charged "+key:
								outs[key]++
							case errors.Is(err, idempotent.ErrInProgress):
								inProgress++
							case errors.As(err, &pgErr):
								failures["SQLSTATE "+pgErr.Code]++
								firstErr = cmp.Or(firstErr, err)
							default:
								failures[fmt.Sprintf("%q, %v", out, err)]++
								firstErr = cmp.Or(firstErr, err)
							}
						}(hs[(k+d)%processes])
					}
				}
				close(start)
				wg.Wait()
				for _, n := range outs {
					replayed += n - 1
				}
			}
			require.Empty(t, failures, "%d of %d requests failed (first: %v)", sumOf(failures), total, firstErr)
			t.Logf("%d requests: %d ran the handler, %d replayed, %d got ErrInProgress", total, len(all), replayed, inProgress)

			for _, key := range all {
				assert.Equal(t, 1, runs[key], "%s: the handler ran once", key)
				out, err := hs[0](ctxT(t), charge{Order: key, Cents: 1})
				require.NoError(t, err)
				assert.Equal(t, "charged "+key, out, "%s: replayed once done", key)
			}
			if tc.useTx {
				sort.Strings(all)
				assert.Equal(t, all, l.entries(t), "each key's row committed once, with its record")
			}
		})
	}
}

// TestHandlersOwnStatementsBehindAPooler: what docs/postgresql.md says of a
// handler's own statements in pgstore.Tx behind a transaction pooler. With
// pgx's defaults, a statement is prepared by name on the server connection
// of the transaction it first runs in, and the next transaction on that
// client connection may get another server connection, where the name is
// unknown; pgx.QueryExecModeExec, per statement or as the pool's
// DefaultQueryExecMode, sends it in one round trip without a name. Within a
// transaction every statement is on one server connection.
func TestHandlersOwnStatementsBehindAPooler(t *testing.T) {
	t.Parallel()
	pooled := poolerURL(t)
	db := ownDatabase(t)
	direct := newPool(t, inDatabase(db))
	setup := newTable(t, direct)
	l := newLedger(t, direct)
	for _, tc := range []struct {
		name    string
		mode    []any
		poolCfg func(*pgxpool.Config)
		// prepared: the statement is prepared by name, so the second run
		// fails (26000) unless the pooler keeps prepared statements itself.
		prepared bool
	}{
		{name: "pgx's default: prepared by name", prepared: true},
		{name: "QueryExecModeExec per statement", mode: []any{pgx.QueryExecModeExec}},
		{name: "DefaultQueryExecMode on the pool", poolCfg: func(cfg *pgxpool.Config) {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		}},
		{name: "QueryExecModeSimpleProtocol per statement", mode: []any{pgx.QueryExecModeSimpleProtocol}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newPoolAt(t, pooled, inDatabase(db, orNoop(tc.poolCfg)))
			other := newPoolAt(t, pooled, inDatabase(db))
			store := pgstore.New(client, func(o *pgstore.Options) { o.Table = setup.Options().Table })
			h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
				tx, err := pgstore.Tx(ctx)
				if err != nil {
					return "", err
				}
				// Two statements of the handler's in its transaction: the
				// same server connection, whatever the mode.
				args := append(slices.Clone(tc.mode), c.Order, c.Cents)
				if _, err := tx.Exec(ctx, `INSERT INTO `+l.table+` (entry, cents) VALUES ($1, $2)`, args...); err != nil {
					return "", err
				}
				var n int
				err = tx.QueryRow(ctx, `SELECT count(*) FROM `+l.table+` WHERE entry = $1`, append(slices.Clone(tc.mode), c.Order)...).Scan(&n)
				return fmt.Sprintf("%s: %d", c.Order, n), err
			}, idempotent.WithKey(chargeKey))

			first := "first " + randomHex(4)
			out, err := h(ctxT(t), charge{Order: first, Cents: 1})
			require.NoError(t, err, "the first transaction")
			assert.Equal(t, first+": 1", out)
			holdServerConn(t, other)
			second := "second " + randomHex(4)
			out, err = h(ctxT(t), charge{Order: second, Cents: 1})
			if !tc.prepared {
				require.NoError(t, err, "the next transaction, on another server connection")
				assert.Equal(t, second+": 1", out)
				return
			}
			if err == nil {
				t.Skip("this pooler keeps prepared statements across server connections (PgBouncer 1.21+ with max_prepared_statements)")
			}
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			assert.Equal(t, "26000", pgErr.Code, "prepared statement does not exist: %v", err)
			assert.NotContains(t, l.entries(t), second, "its transaction rolled back")
		})
	}
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func orNoop(fn func(*pgxpool.Config)) func(*pgxpool.Config) {
	if fn == nil {
		return func(*pgxpool.Config) {}
	}
	return fn
}
