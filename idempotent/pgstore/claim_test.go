package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

func TestClaimReportsWhatItReplaced(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	now := time.Now()
	later := now.Add(2 * time.Minute) // past every lease below

	for _, tc := range []struct {
		name                   string
		prepare                func(t *testing.T, rec storage.Record)
		retryFingerprint       string // "" keeps rec's
		wantTookOver, wantResd bool
		wantSteps              []string
	}{
		{name: "a lapsed owner: a takeover, steps kept", prepare: func(t *testing.T, rec storage.Record) {
			require.NoError(t, store.AppendStep(ctxT(t), rec.ID, rec.Lease, storage.Step{Name: "charge", Data: []byte("ch_1")}))
		}, wantTookOver: true, wantSteps: []string{"charge"}},
		{name: "a suspended owner: a resume, steps kept", prepare: func(t *testing.T, rec storage.Record) {
			require.NoError(t, store.AppendStep(ctxT(t), rec.ID, rec.Lease, storage.Step{Name: "charge", Data: []byte("ch_1")}))
			require.NoError(t, store.Suspend(ctxT(t), rec.ID, rec.Lease, now))
		}, wantResd: true, wantSteps: []string{"charge"}},
		{name: "a lapsed owner of an unbound payload: a takeover, steps dropped", prepare: func(t *testing.T, rec storage.Record) {
			require.NoError(t, store.AppendStep(ctxT(t), rec.ID, rec.Lease, storage.Step{Name: "charge", Data: []byte("ch_1")}))
		}, retryFingerprint: "none", wantTookOver: true},
		{name: "an expired completed record: neither", prepare: func(t *testing.T, rec storage.Record) {
			done := completedRecord(rec, []byte("r"), now)
			done.ExpiresAt = now.Add(time.Second)
			require.NoError(t, store.Complete(ctxT(t), done))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := liveRecord(now)
			rec.LeaseExpiresAt = now.Add(time.Minute)
			if tc.retryFingerprint == "none" {
				rec.Fingerprint = ""
			}
			_, err := store.Claim(ctxT(t), rec, now)
			require.NoError(t, err)
			tc.prepare(t, rec)
			retry := rec
			retry.Lease = randomHex(16)
			retry.LeaseExpiresAt = later.Add(time.Minute)
			if tc.retryFingerprint == "none" {
				retry.Fingerprint = "fp-other"
			}
			res, err := store.Claim(ctxT(t), retry, later)
			require.NoError(t, err)
			require.True(t, res.Claimed)
			assert.Equal(t, tc.wantTookOver, res.TookOver, "TookOver")
			assert.Equal(t, tc.wantResd, res.Resumed, "Resumed")
			var names []string
			for _, s := range res.Steps {
				names = append(names, s.Name)
			}
			assert.Equal(t, tc.wantSteps, names)
			got, err := store.Get(ctxT(t), rec.ID)
			require.NoError(t, err)
			assert.Equal(t, retry.Lease, got.Lease)
			assert.False(t, got.Suspended)
			assert.Len(t, got.Steps, len(tc.wantSteps), "the stored steps are the kept ones")
		})
	}
}

func TestClaimRetriedAfterALostResponseIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	require.NoError(t, store.AppendStep(ctxT(t), rec.ID, rec.Lease, storage.Step{Name: "a", Data: []byte("1")}))
	res, err := store.Claim(ctxT(t), rec, now)
	require.NoError(t, err)
	assert.True(t, res.Claimed)
	assert.False(t, res.TookOver)
	require.Len(t, res.Steps, 1, "the own record's steps, as the first answer would have carried them")
	got, err := store.Get(ctxT(t), rec.ID)
	require.NoError(t, err)
	assert.Len(t, got.Steps, 1, "nothing was rewritten")
}

// TestClaimMeetsARowItsSnapshotCannotSee: the key's row is inserted by a
// transaction that commits while the claim's statement waits on it. The
// statement's own read cannot see that row; the claim runs again and
// decides on it (refused: the live record; or a lapsed one: a takeover).
func TestClaimMeetsARowItsSnapshotCannotSee(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	now := time.Now()
	for _, tc := range []struct {
		name  string
		lease time.Time // of the row inserted concurrently
		want  func(t *testing.T, res storage.ClaimResult, other storage.Record)
	}{
		{"live: refused with it", now.Add(time.Minute), func(t *testing.T, res storage.ClaimResult, other storage.Record) {
			require.False(t, res.Claimed)
			require.NotNil(t, res.Existing)
			assert.Equal(t, other.Lease, res.Existing.Lease)
		}},
		{"lapsed: taken over", now.Add(-time.Second), func(t *testing.T, res storage.ClaimResult, _ storage.Record) {
			require.True(t, res.Claimed)
			assert.True(t, res.TookOver)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := liveRecord(now)
			other.LeaseExpiresAt = tc.lease
			tx, err := pool.Begin(ctxT(t))
			require.NoError(t, err)
			_, err = tx.Exec(ctxT(t), `INSERT INTO "`+store.Options().Table+`" (id, status, expires_at, lease_expires_at, lease, fingerprint, version)
				VALUES ($1, 'INPROGRESS', $2, $3, $4, $5, 1)`, other.ID, other.ExpiresAt, other.LeaseExpiresAt, other.Lease, other.Fingerprint)
			require.NoError(t, err)

			mine := other
			mine.Lease = randomHex(16)
			mine.LeaseExpiresAt = now.Add(time.Minute)
			type answer struct {
				res storage.ClaimResult
				err error
			}
			got := make(chan answer, 1)
			go func() {
				res, err := store.Claim(ctxT(t), mine, now)
				got <- answer{res, err}
			}()
			waitForLockWait(t, pool, store.Options().Table)
			require.NoError(t, tx.Commit(ctxT(t)))
			a := <-got
			require.NoError(t, a.err)
			tc.want(t, a.res, other)
		})
	}
}

func TestClaimRefusesTextPostgreSQLCannotHold(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	now := time.Now()
	for _, id := range []string{"p\x00#1", "p\xff#1"} {
		rec := liveRecord(now)
		rec.ID = id
		_, err := store.Claim(ctxT(t), rec, now)
		require.ErrorIs(t, err, pgstore.ErrInvalidText)
	}
	rec := claimNew(t, store, now)
	err := store.AppendStep(ctxT(t), rec.ID, rec.Lease, storage.Step{Name: "bad\x00", Data: []byte("x")})
	require.ErrorIs(t, err, pgstore.ErrInvalidText)
}

func TestMaxItemBytes(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, func(o *pgstore.Options) { o.MaxItemBytes = 1000 })
	now := time.Now()
	rec := claimNew(t, store, now)
	// Steps fill the record up to the limit, as PostgreSQL measures it.
	step := storage.Step{Name: "s", Data: bytes.Repeat([]byte{'x'}, 300)}
	var err error
	n := 0
	for ; n < 10; n++ {
		step.Name = string(rune('a' + n))
		if err = store.AppendStep(ctxT(t), rec.ID, rec.Lease, step); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Equal(t, 2, n, "two 301-byte steps fit beside the record's ~140 bytes, a third does not")
	got, err := store.Get(ctxT(t), rec.ID)
	require.NoError(t, err)
	assert.Len(t, got.Steps, 2, "the refused step was not written")

	err = store.Complete(ctxT(t), completedRecord(rec, bytes.Repeat([]byte{'x'}, 1000), now))
	require.ErrorIs(t, err, storage.ErrTooLarge)
	require.NoError(t, store.Complete(ctxT(t), completedRecord(rec, []byte("ok"), now)))
	// On a completed record, a step is a lost lease, not a size problem.
	err = store.AppendStep(ctxT(t), rec.ID, rec.Lease, storage.Step{Name: "late", Data: []byte("x")})
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	assert.ErrorContains(t, err, "no longer in progress")
}

func TestSchemaQualifiedTable(t *testing.T) {
	t.Parallel()
	pool := newPool(t, nil)
	schema := "idemkit_schema_" + randomHex(4)
	_, err := pool.Exec(ctxT(t), `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)
	})
	store := pgstore.New(pool, func(o *pgstore.Options) { o.Schema, o.Table = schema, `Odd "name"` })
	require.NoError(t, store.CreateTable(ctxT(t)))
	require.NoError(t, store.CreateTable(ctxT(t)), "CreateTable is idempotent")
	assert.Contains(t, store.Schema(), `"`+schema+`"."Odd ""name"""`)
	assert.Contains(t, store.Schema(), `INDEX IF NOT EXISTS "Odd ""name""_expires_at"`)
	now := time.Now()
	rec := claimNew(t, store, now)
	require.NoError(t, store.Complete(ctxT(t), completedRecord(rec, []byte("r"), now)))
	var n int
	require.NoError(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM `+schema+`."Odd ""name"""`).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	now := time.Now()
	var live, expired []storage.Record
	for i := range 25 {
		rec := claimNew(t, store, now)
		done := completedRecord(rec, []byte("r"), now)
		if i%5 == 0 {
			live = append(live, rec)
			continue
		}
		done.ExpiresAt = now.Add(time.Duration(i) * time.Second)
		require.NoError(t, store.Complete(ctxT(t), done))
		expired = append(expired, done)
	}
	sweepAt := now.Add(time.Minute) // past the expired ones, before the live ones' hour

	n, err := store.DeleteExpired(ctxT(t), sweepAt, 7)
	require.NoError(t, err)
	assert.Equal(t, len(expired), n)
	for _, rec := range expired {
		_, err := store.Get(ctxT(t), rec.ID)
		require.ErrorIs(t, err, storage.ErrNotFound)
	}
	for _, rec := range live {
		_, err := store.Get(ctxT(t), rec.ID)
		require.NoError(t, err)
	}
	n, err = store.DeleteExpired(ctxT(t), sweepAt, 7)
	require.NoError(t, err)
	assert.Zero(t, n)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = store.DeleteExpired(ctx, sweepAt, 7)
	require.ErrorIs(t, err, context.Canceled)
}

func TestGetDeleteScan(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	now := time.Now()
	a := claimNew(t, store, now)
	require.NoError(t, store.AppendStep(ctxT(t), a.ID, a.Lease, storage.Step{Name: "s", Data: nil}))
	b := claimNew(t, store, now)
	require.NoError(t, store.Complete(ctxT(t), completedRecord(b, []byte("r"), now)))

	_, err := store.Get(ctxT(t), "itest#missing")
	require.ErrorIs(t, err, storage.ErrNotFound)

	paged := pgstore.New(pool, func(o *pgstore.Options) { *o = store.Options(); o.ScanPageSize = 1 })
	var ids []string
	require.NoError(t, paged.Scan(ctxT(t), storage.ScanOptions{Status: storage.StatusInProgress}, func(r storage.Record, err error) bool {
		require.NoError(t, err)
		ids = append(ids, r.ID)
		return true
	}))
	assert.Equal(t, []string{a.ID}, ids)
	ids = nil
	require.NoError(t, paged.Scan(ctxT(t), storage.ScanOptions{IDPrefix: b.ID[:20]}, func(r storage.Record, err error) bool {
		ids = append(ids, r.ID)
		return true
	}))
	assert.Equal(t, []string{b.ID}, ids, "the prefix's range only")

	got, err := store.Get(ctxT(t), a.ID)
	require.NoError(t, err)
	stale := got
	require.NoError(t, store.AppendStep(ctxT(t), a.ID, a.Lease, storage.Step{Name: "t", Data: []byte("2")}))
	err = store.Delete(ctxT(t), stale)
	require.ErrorIs(t, err, storage.ErrChanged)
	require.False(t, errors.Is(err, storage.ErrNotFound))
	got, err = store.Get(ctxT(t), a.ID)
	require.NoError(t, err)
	require.NoError(t, store.Delete(ctxT(t), got))
	err = store.Delete(ctxT(t), got)
	require.ErrorIs(t, err, storage.ErrNotFound)
}
