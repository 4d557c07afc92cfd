package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

func TestAdminGetDelete(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	now := time.Now()

	_, err := store.Get(ctx, "itest#missing")
	require.ErrorIs(t, err, redisstore.ErrNotFound)

	rec := claimNew(t, store, now)
	got, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, rec.Lease, got.Lease)
	assert.Equal(t, rec.LeaseExpiresAt.UnixMilli(), got.LeaseExpiresAt.UnixMilli())
	assert.Equal(t, rec.ExpiresAt.Unix(), got.ExpiresAt.Unix())
	assert.Equal(t, rec.Fingerprint, got.Fingerprint)
	assert.Equal(t, storage.RecordVersion, got.Version)

	// Completed since it was read: Delete refuses the stale view.
	require.NoError(t, store.Complete(ctx, completedRecord(rec, []byte("p{}"), now)))
	err = store.Delete(ctx, got)
	require.ErrorIs(t, err, redisstore.ErrChanged)
	assert.NotErrorIs(t, err, redisstore.ErrNotFound)

	fresh, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusCompleted, fresh.Status)
	assert.Equal(t, []byte("p{}"), fresh.Data)
	require.NoError(t, store.Delete(ctx, fresh))
	_, err = store.Get(ctx, rec.ID)
	require.ErrorIs(t, err, redisstore.ErrNotFound)
	err = store.Delete(ctx, fresh)
	require.ErrorIs(t, err, redisstore.ErrChanged)
	require.ErrorIs(t, err, redisstore.ErrNotFound)
}

func TestAdminDeleteRefusesTakeover(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := liveRecord(now)
	rec.LeaseExpiresAt = now.Add(time.Second)
	_, err := store.Claim(ctx, rec, now)
	require.NoError(t, err)
	read, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)

	later := now.Add(2 * time.Second) // the lease has lapsed: a retry takes over
	next := rec
	next.Lease, next.LeaseExpiresAt = "new-owner", later.Add(time.Minute)
	res, err := store.Claim(ctx, next, later)
	require.NoError(t, err)
	require.True(t, res.TookOver)

	require.ErrorIs(t, store.Delete(ctx, read), redisstore.ErrChanged)
	still, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, "new-owner", still.Lease)
}

// TestAdminDeleteRefusesNewStep: a step finished, or a suspension, since
// the read is a change: forgetting the record would throw away a step the
// operator never saw.
func TestAdminDeleteRefusesNewStep(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	tests := []struct {
		name   string
		change func(rec storage.Record) error
	}{
		{"a step", func(rec storage.Record) error {
			return store.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "ship", Data: []byte("1")})
		}},
		{"suspended", func(rec storage.Record) error {
			return store.Suspend(ctx, rec.ID, rec.Lease, now.Add(-time.Second))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := claimNew(t, store, now)
			require.NoError(t, store.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}))
			read, err := store.Get(ctx, rec.ID)
			require.NoError(t, err)
			require.Len(t, read.Steps, 1)

			require.NoError(t, tt.change(rec))
			require.ErrorIs(t, store.Delete(ctx, read), redisstore.ErrChanged)

			fresh, err := store.Get(ctx, rec.ID)
			require.NoError(t, err)
			require.NoError(t, store.Delete(ctx, fresh), "deleted as read again")
		})
	}
}

func TestAdminCorrupt(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	tests := []struct {
		name       string
		id         string
		write      func(key string) error
		wantType   string
		wantFields map[string]string
		wantErr    string
	}{
		{"bad number", "itest#badnum", func(key string) error {
			return client.HSet(ctx, key, "status", "COMPLETED", "expiration", "soon", "lease", "x").Err()
		}, "hash", map[string]string{"status": "COMPLETED", "expiration": "soon", "lease": "x"}, `field "expiration"`},
		{"not a hash", "itest#string", func(key string) error {
			return client.Set(ctx, key, "hello", time.Minute).Err()
		}, "string", nil, "holds a Redis string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.write(store.Key(tt.id)))
			_, err := store.Get(ctx, tt.id)
			require.ErrorIs(t, err, storage.ErrCorruptRecord)
			var ce *redisstore.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.id, ce.ID)
			assert.Equal(t, tt.wantType, ce.Type)
			assert.Equal(t, tt.wantFields, ce.Fields)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestAdminScan(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	inProgress := map[string]bool{}
	for i := range 7 {
		rec := claimNew(t, store, now)
		if i%2 == 0 {
			require.NoError(t, store.Complete(ctx, completedRecord(rec, []byte("p{}"), now)))
		} else {
			inProgress[rec.ID] = true
		}
	}
	require.NoError(t, client.Set(ctx, store.Key("bad#1"), "x", time.Minute).Err())
	require.NoError(t, client.Set(ctx, "elsewhere:"+store.Key("y"), "x", time.Minute).Err()) // not under the prefix
	t.Cleanup(func() { client.Del(ctx, "elsewhere:"+store.Key("y")) })

	tests := []struct {
		name      string
		opts      redisstore.ScanOptions
		stopAfter int
		wantIDs   int
		wantBad   int
	}{
		{"all", redisstore.ScanOptions{PageSize: 2}, 0, 7, 1},
		{"in progress", redisstore.ScanOptions{Status: storage.StatusInProgress}, 0, 3, 1},
		{"stopped by the callback", redisstore.ScanOptions{PageSize: 1}, 2, 2, -1},
		{"one id prefix", redisstore.ScanOptions{IDPrefix: "bad#"}, 0, 0, 1},
		{"a glob in the id prefix matches itself only", redisstore.ScanOptions{IDPrefix: "b*"}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids, corrupt int
			var last redisstore.ScanProgress
			tt.opts.Progress = func(p redisstore.ScanProgress) { last = p }
			err := store.Scan(ctx, tt.opts, func(rec storage.Record, err error) bool {
				if err != nil {
					require.ErrorIs(t, err, storage.ErrCorruptRecord)
					corrupt++
				} else {
					ids++
					if tt.opts.Status == storage.StatusInProgress {
						assert.True(t, inProgress[rec.ID], rec.ID)
					}
				}
				return tt.stopAfter == 0 || ids+corrupt < tt.stopAfter
			})
			require.NoError(t, err)
			if tt.wantBad >= 0 {
				assert.Equal(t, tt.wantIDs, ids)
				assert.Equal(t, tt.wantBad, corrupt)
				if tt.opts.IDPrefix == "" {
					assert.Equal(t, int64(8), last.Scanned)
				} else {
					assert.Equal(t, int64(tt.wantIDs+tt.wantBad), last.Scanned, "only the prefix's keys are read")
				}
			} else {
				assert.Equal(t, tt.stopAfter, ids+corrupt)
			}
			assert.Equal(t, int64(ids+corrupt), last.Matched)
		})
	}
}
