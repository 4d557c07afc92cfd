package pgstore_test

import (
	"context"
	"errors"
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
)

// The transactional outcomes of issue 24, on PostgreSQL, through
// idempotent.Wrap: the handler's writes (rows of a ledger table, inserted in
// pgstore.Tx) commit with the record's completion or not at all.

// ledger is a business table of the handler's: one row per charge, the
// amount never negative (a CHECK the handler can violate), and a deferred
// unique slot (a constraint PostgreSQL checks only at COMMIT).
type ledger struct {
	pool  *pgxpool.Pool
	table string
}

func newLedger(t testing.TB, pool *pgxpool.Pool) *ledger {
	t.Helper()
	l := &ledger{pool: pool, table: "idemkit_ledger_" + randomHex(8)}
	_, err := pool.Exec(ctxT(t), `CREATE TABLE `+l.table+` (
		entry text PRIMARY KEY,
		cents bigint NOT NULL CHECK (cents >= 0),
		slot  text UNIQUE DEFERRABLE INITIALLY DEFERRED
	)`)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+l.table)
	})
	return l
}

// insert adds a ledger row in the run's transaction.
func (l *ledger) insert(ctx context.Context, entry string, cents int64, slot *string) error {
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+l.table+` (entry, cents, slot) VALUES ($1, $2, $3)`, entry, cents, slot)
	return err
}

// entries lists the committed rows.
func (l *ledger) entries(t testing.TB) []string {
	t.Helper()
	rows, err := l.pool.Query(ctxT(t), `SELECT entry FROM `+l.table+` ORDER BY entry`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return got
}

type charge struct {
	Order string `json:"order"`
	Cents int64  `json:"cents"`
}

func chargeKey(c charge) (string, error) { return c.Order, nil }

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(time.Now().Unix(), 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestTxWritesCommitWithTheCompletion(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	l := newLedger(t, pool)
	runs := 0
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
		runs++
		if err := l.insert(ctx, "charge "+c.Order, c.Cents, nil); err != nil {
			return "", err
		}
		return "charged " + c.Order, nil
	}, idempotent.WithKey(chargeKey))

	for range 3 {
		out, err := h(ctxT(t), charge{Order: "o1", Cents: 500})
		require.NoError(t, err)
		assert.Equal(t, "charged o1", out)
	}
	assert.Equal(t, 1, runs, "duplicates are replayed")
	assert.Equal(t, []string{"charge o1"}, l.entries(t), "the write committed once, with the completion")
}

func TestTxStaleOwnerCommitsNothingAndGetsNoSuccess(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	l := newLedger(t, pool)
	clk := newClock()
	var events []idempotent.Event
	var evMu sync.Mutex
	eng := idempotent.New(store, idempotent.WithClock(clk.Now), idempotent.WithMaxLease(10*time.Second),
		idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) {
			evMu.Lock()
			defer evMu.Unlock()
			events = append(events, e)
		}))
	stale, resume := make(chan struct{}), make(chan struct{})
	h := idempotent.Wrap(eng, func(ctx context.Context, c charge) (string, error) {
		if err := l.insert(ctx, "charge by "+c.Order, c.Cents, nil); err != nil {
			return "", err
		}
		if c.Order == "stale" {
			close(stale) // its transaction is open, its row written in it
			<-resume
		}
		return "charged by " + c.Order, nil
	}, idempotent.WithKey(func(charge) (string, error) { return "k", nil }))

	var staleErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, staleErr = h(context.Background(), charge{Order: "stale", Cents: 1})
	}()
	<-stale
	clk.Advance(time.Minute) // the stale owner's lease lapsed: the next call takes the record over
	out, err := h(ctxT(t), charge{Order: "new", Cents: 1})
	require.NoError(t, err)
	assert.Equal(t, "charged by new", out)
	close(resume)
	<-done

	require.ErrorIs(t, staleErr, idempotent.ErrInProgress, "a caller whose writes did not commit gets what a retry gets")
	require.ErrorIs(t, staleErr, storage.ErrLeaseLost)
	assert.Equal(t, []string{"charge by new"}, l.entries(t), "the stale owner's row did not commit")
	out, err = h(ctxT(t), charge{Order: "stale", Cents: 1})
	require.NoError(t, err)
	assert.Equal(t, "charged by new", out, "the retry gets the new owner's replay")
	evMu.Lock()
	defer evMu.Unlock()
	var outcomes []idempotent.Outcome
	for _, e := range events {
		outcomes = append(outcomes, e.Outcome)
	}
	assert.Contains(t, outcomes, idempotent.OutcomeLeaseLost)
}

// TestTxFenceWaitsForAConcurrentClaim: a claim that holds the record's row
// (here a transaction that locked it, as the claim's statement does while it
// runs) makes the stale owner's completion wait; once the takeover commits,
// the completion reads the new lease, updates nothing, and nothing of the
// stale owner's transaction commits. READ COMMITTED's re-check of the
// updated row is what makes the fence exact.
func TestTxFenceWaitsForAConcurrentClaim(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	l := newLedger(t, pool)
	now := time.Now()
	rec := claimNew(t, store, now)

	staleTx, err := store.BeginTx(ctxT(t), rec.ID, rec.Lease)
	require.NoError(t, err)
	ctx := storage.ContextWithTx(ctxT(t), opener{staleTx})
	require.NoError(t, l.insert(ctx, "stale", 1, nil))

	// The takeover, holding the row until it commits.
	takeover, err := pool.Begin(ctxT(t))
	require.NoError(t, err)
	newLease := randomHex(16)
	_, err = takeover.Exec(ctxT(t), `UPDATE "`+store.Options().Table+`" SET lease = $2 WHERE id = $1`, rec.ID, newLease)
	require.NoError(t, err)

	commitErr := make(chan error, 1)
	go func() { commitErr <- staleTx.Commit(ctxT(t), completedRecord(rec, []byte("stale"), now)) }()
	waitForLockWait(t, pool, store.Options().Table)
	require.NoError(t, takeover.Commit(ctxT(t)))

	err = <-commitErr
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	assert.Empty(t, l.entries(t), "nothing of the stale owner's transaction committed")
	got, err := store.Get(ctxT(t), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusInProgress, got.Status)
	assert.Equal(t, newLease, got.Lease)
}

// waitForLockWait waits until a statement on table waits for a lock.
func waitForLockWait(t testing.TB, pool *pgxpool.Pool, table string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, table).Scan(&n))
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waited for the row lock")
		}
		time.Sleep(5 * time.Millisecond) // polling for a state, not timing
	}
}

// opener hands a begun storage.Tx to pgstore.Tx, as the engine does.
type opener struct{ tx storage.Tx }

func (o opener) OpenTx(context.Context) (storage.Tx, error) { return o.tx, nil }

func TestTxFailedConstraintCommitsNothingAndReleases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		handler func(l *ledger) func(context.Context, charge) (string, error)
		wantErr func(t *testing.T, err error)
	}{
		{
			// The handler ignores its failed statement and returns success:
			// PostgreSQL aborted the transaction, so the completion fails.
			name: "a statement failed and the handler went on",
			handler: func(l *ledger) func(context.Context, charge) (string, error) {
				return func(ctx context.Context, c charge) (string, error) {
					require.NoError(t, l.insert(ctx, "ok row", 1, nil))
					_ = l.insert(ctx, "negative", -c.Cents, nil) // the CHECK refuses it
					return "charged", nil
				}
			},
			wantErr: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idempotent.ErrTxAborted)
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr)
				assert.Equal(t, "25P02", pgErr.Code, "in_failed_sql_transaction")
			},
		},
		{
			// A deferred constraint fails at COMMIT.
			name: "a deferred constraint failed at commit",
			handler: func(l *ledger) func(context.Context, charge) (string, error) {
				return func(ctx context.Context, c charge) (string, error) {
					slot := "taken"
					return "charged", l.insert(ctx, "charge "+c.Order, c.Cents, &slot)
				}
			},
			wantErr: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idempotent.ErrTxAborted)
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr)
				assert.Equal(t, "23505", pgErr.Code, "unique_violation")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, pool := newStore(t)
			l := newLedger(t, pool)
			_, err := pool.Exec(ctxT(t), `INSERT INTO `+l.table+` (entry, cents, slot) VALUES ('before', 0, 'taken')`)
			require.NoError(t, err)
			var events []idempotent.Event
			eng := idempotent.New(store, idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) { events = append(events, e) }))
			h := idempotent.Wrap(eng, tc.handler(l), idempotent.WithKey(chargeKey))

			_, err = h(ctxT(t), charge{Order: "o1", Cents: 5})
			tc.wantErr(t, err)
			assert.Equal(t, []string{"before"}, l.entries(t), "nothing of the run committed")
			require.Len(t, events, 1)
			assert.Equal(t, idempotent.OutcomeHandlerError, events[0].Outcome)
			_, err = store.Get(ctxT(t), events[0].RecordID)
			require.ErrorIs(t, err, storage.ErrNotFound, "the record was released")
		})
	}
}

func TestTxHandlerErrorRollsBackAndReleases(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	l := newLedger(t, pool)
	fail := errors.New("card declined")
	runs := 0
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
		runs++
		if err := l.insert(ctx, "charge "+c.Order, c.Cents, nil); err != nil {
			return "", err
		}
		if runs == 1 {
			return "", fail
		}
		return "charged", nil
	}, idempotent.WithKey(chargeKey))

	_, err := h(ctxT(t), charge{Order: "o1", Cents: 5})
	require.ErrorIs(t, err, fail)
	assert.Empty(t, l.entries(t))
	out, err := h(ctxT(t), charge{Order: "o1", Cents: 5})
	require.NoError(t, err, "the record was released: the retry runs")
	assert.Equal(t, "charged", out)
	assert.Equal(t, []string{"charge o1"}, l.entries(t))
}

func TestTxWithoutARecordCommitsTheWritesAlone(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	l := newLedger(t, pool)
	h := idempotent.Wrap(idempotent.New(store, idempotent.WithOptionalKey()), func(ctx context.Context, c charge) (string, error) {
		return "charged", l.insert(ctx, "charge "+c.Order, c.Cents, nil)
	}, idempotent.WithKey(func(charge) (string, error) { return "", nil }))
	_, err := h(ctxT(t), charge{Order: "o1", Cents: 5})
	require.NoError(t, err)
	assert.Equal(t, []string{"charge o1"}, l.entries(t))
}

func TestTxIsTheEnginesToSettle(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	l := newLedger(t, pool)

	_, err := pgstore.Tx(ctxT(t))
	require.ErrorIs(t, err, idempotent.ErrNoTx, "outside a run")

	var commitErr, rollbackErr, stepErr error
	h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
		if err := l.insert(ctx, "charge", c.Cents, nil); err != nil {
			return "", err
		}
		tx, err := pgstore.Tx(ctx)
		if err != nil {
			return "", err
		}
		commitErr, rollbackErr = tx.Commit(ctx), tx.Rollback(ctx)
		_, stepErr = idempotent.Step(ctx, "inside", func(ctx context.Context) (int, error) {
			_, err := pgstore.Tx(ctx)
			return 0, err
		})
		// A savepoint is the handler's.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return "", err
		}
		if _, err := sp.Exec(ctx, `INSERT INTO `+l.table+` (entry, cents) VALUES ('rolled back', 1)`); err != nil {
			return "", err
		}
		return "charged", sp.Rollback(ctx)
	}, idempotent.WithKey(chargeKey))
	_, err = h(ctxT(t), charge{Order: "o1", Cents: 5})
	require.NoError(t, err)
	require.ErrorIs(t, commitErr, pgstore.ErrTxOwned)
	require.ErrorIs(t, rollbackErr, pgstore.ErrTxOwned)
	require.ErrorIs(t, stepErr, idempotent.ErrNoTx, "inside a step")
	assert.Equal(t, []string{"charge"}, l.entries(t))
}

// TestTxCommitOutcomes drives the storage.Tx directly: a lost lease, a
// retried commit, a record too large, rollback.
func TestTxCommitOutcomes(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t, func(o *pgstore.Options) { o.MaxItemBytes = 4 << 10 })
	l := newLedger(t, pool)
	now := time.Now()

	t.Run("too large leaves the transaction open", func(t *testing.T) {
		rec := claimNew(t, store, now)
		tx, err := store.BeginTx(ctxT(t), rec.ID, rec.Lease)
		require.NoError(t, err)
		require.NoError(t, l.insert(storage.ContextWithTx(ctxT(t), opener{tx}), "big "+rec.ID, 1, nil))
		err = tx.Commit(ctxT(t), completedRecord(rec, make([]byte, 8<<10), now))
		require.ErrorIs(t, err, storage.ErrTooLarge)
		require.NoError(t, tx.Commit(ctxT(t), completedRecord(rec, []byte("small"), now)), "a smaller record commits")
		require.NoError(t, tx.Commit(ctxT(t), completedRecord(rec, []byte("small"), now)), "a retried commit succeeds again")
		got, err := store.Get(ctxT(t), rec.ID)
		require.NoError(t, err)
		assert.Equal(t, []byte("small"), got.Data)
		assert.Contains(t, l.entries(t), "big "+rec.ID)
		require.NoError(t, tx.Rollback(ctxT(t)), "rollback after a commit is a no-op")
	})
	t.Run("rollback commits nothing and leaves the record", func(t *testing.T) {
		rec := claimNew(t, store, now)
		tx, err := store.BeginTx(ctxT(t), rec.ID, rec.Lease)
		require.NoError(t, err)
		require.NoError(t, l.insert(storage.ContextWithTx(ctxT(t), opener{tx}), "rolled "+rec.ID, 1, nil))
		require.NoError(t, tx.Rollback(ctxT(t)))
		require.NoError(t, tx.Rollback(ctxT(t)))
		assert.NotContains(t, l.entries(t), "rolled "+rec.ID)
		got, err := store.Get(ctxT(t), rec.ID)
		require.NoError(t, err)
		assert.Equal(t, storage.StatusInProgress, got.Status)
		require.Error(t, tx.Commit(ctxT(t), completedRecord(rec, nil, now)), "no commit after a rollback")
	})
	t.Run("a released record is a lost lease", func(t *testing.T) {
		rec := claimNew(t, store, now)
		tx, err := store.BeginTx(ctxT(t), rec.ID, rec.Lease)
		require.NoError(t, err)
		require.NoError(t, l.insert(storage.ContextWithTx(ctxT(t), opener{tx}), "gone "+rec.ID, 1, nil))
		require.NoError(t, store.Release(ctxT(t), rec.ID, rec.Lease))
		err = tx.Commit(ctxT(t), completedRecord(rec, nil, now))
		require.ErrorIs(t, err, storage.ErrLeaseLost)
		assert.ErrorContains(t, err, "gone")
		assert.NotContains(t, l.entries(t), "gone "+rec.ID)
		require.NoError(t, tx.Rollback(ctxT(t)))
	})
}
