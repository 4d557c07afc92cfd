package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Get, Delete and their errors are the conformance suite's (storetest's
// Admin cases, run by TestConformance); these tests pin what is this
// store's own: what a corrupt key shows, and how SCAN is driven.

func TestAdminCorrupt(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	tests := []struct {
		name       string
		id         string
		write      func(key string) error
		wantFields map[string]string // the hash's fields quoted, or the key's type
		wantErr    string
	}{
		{"bad number", "itest#badnum", func(key string) error {
			return client.HSet(ctx, key, "status", "COMPLETED", "expiration", "soon", "lease", "x").Err()
		}, map[string]string{"status": `"COMPLETED"`, "expiration": `"soon"`, "lease": `"x"`}, `field "expiration"`},
		{"not a hash", "itest#string", func(key string) error {
			return client.Set(ctx, key, "hello", time.Minute).Err()
		}, map[string]string{"(redis type)": "string"}, "holds a Redis string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.write(store.Key(tt.id)))
			_, err := store.Get(ctx, tt.id)
			require.ErrorIs(t, err, storage.ErrCorruptRecord)
			var ce *storage.CorruptRecordError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.id, ce.ID)
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
		opts      storage.ScanOptions
		count     int64 // Options.ScanCount
		stopAfter int
		wantIDs   int
		wantBad   int
	}{
		{"all", storage.ScanOptions{}, 2, 0, 7, 1},
		{"in progress", storage.ScanOptions{Status: storage.StatusInProgress}, 0, 0, 3, 1},
		{"stopped by the callback", storage.ScanOptions{}, 1, 2, 2, -1},
		{"one id prefix", storage.ScanOptions{IDPrefix: "bad#"}, 0, 0, 0, 1},
		{"a glob in the id prefix matches itself only", storage.ScanOptions{IDPrefix: "b*"}, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids, corrupt int
			var last storage.ScanProgress
			tt.opts.Progress = func(p storage.ScanProgress) { last = p }
			paged := redisstore.New(client, func(o *redisstore.Options) {
				*o = store.Options()
				o.ScanCount = tt.count
			})
			err := paged.Scan(ctx, tt.opts, func(rec storage.Record, err error) bool {
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
