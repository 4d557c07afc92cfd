package dynamostore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

func TestLocalAdminGetDelete(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	now := time.Now()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newLocalStore(t, client, l)
			ctx := t.Context()

			_, err := store.Get(ctx, randomID())
			require.ErrorIs(t, err, dynamostore.ErrNotFound)

			rec := liveRecord(now)
			_, err = store.Claim(ctx, rec, now)
			require.NoError(t, err)
			got, err := store.Get(ctx, rec.ID)
			require.NoError(t, err)
			assert.Equal(t, rec.ID, got.ID)
			assert.Equal(t, rec.Lease, got.Lease)
			assert.Equal(t, rec.LeaseExpiresAt.UnixMilli(), got.LeaseExpiresAt.UnixMilli())
			assert.Equal(t, rec.Fingerprint, got.Fingerprint)
			assert.Equal(t, storage.RecordVersion, got.Version)

			// Completed since it was read: Delete refuses the stale view.
			done := rec
			done.Status, done.Data, done.ExpiresAt = storage.StatusCompleted, []byte("p{}"), now.Add(2*time.Hour)
			require.NoError(t, store.Complete(ctx, done))
			err = store.Delete(ctx, got)
			require.ErrorIs(t, err, dynamostore.ErrChanged)
			assert.NotErrorIs(t, err, dynamostore.ErrNotFound)

			// Read again, the delete goes through; a second one finds it gone.
			fresh, err := store.Get(ctx, rec.ID)
			require.NoError(t, err)
			assert.Equal(t, storage.StatusCompleted, fresh.Status)
			assert.True(t, fresh.LeaseExpiresAt.IsZero())
			require.NoError(t, store.Delete(ctx, fresh))
			_, err = store.Get(ctx, rec.ID)
			require.ErrorIs(t, err, dynamostore.ErrNotFound)
			err = store.Delete(ctx, fresh)
			require.ErrorIs(t, err, dynamostore.ErrChanged)
			require.ErrorIs(t, err, dynamostore.ErrNotFound)
		})
	}
}

func TestLocalAdminDeleteRefusesTakeover(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	store, _ := newLocalStore(t, client, layouts[0])
	ctx := t.Context()
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

	require.ErrorIs(t, store.Delete(ctx, read), dynamostore.ErrChanged)
	still, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, "new-owner", still.Lease)
}

func TestLocalAdminCorrupt(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	store, table := newLocalStore(t, client, layouts[0])
	ctx := t.Context()
	id := randomID()
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: id}, "status": &types.AttributeValueMemberN{Value: "1"},
	}})
	require.NoError(t, err)

	_, err = store.Get(ctx, id)
	require.ErrorIs(t, err, storage.ErrCorruptRecord)
	var ce *dynamostore.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, id, ce.ID)
	assert.Equal(t, &types.AttributeValueMemberN{Value: "1"}, ce.Item["status"])
	assert.Contains(t, err.Error(), `attribute "status" is N, want S`)
}

func TestLocalAdminScan(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	now := time.Now()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, table := newLocalStore(t, client, l)
			ctx := t.Context()
			inProgress := map[string]bool{}
			for i := range 7 {
				rec := liveRecord(now)
				_, err := store.Claim(ctx, rec, now)
				require.NoError(t, err)
				if i%2 == 0 {
					rec.Status, rec.Data = storage.StatusCompleted, []byte("p{}")
					require.NoError(t, store.Complete(ctx, rec))
				} else {
					inProgress[rec.ID] = true
				}
			}
			// A damaged item in the same partition, and (composite layout) an
			// item of another partition that the Query must not read.
			bad := map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "INPROGRESS"}}
			other := map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "INPROGRESS"},
				"expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}}
			if l.composite {
				pk := store.Options().StaticPartitionKey
				bad["pk"], bad["sk"] = &types.AttributeValueMemberS{Value: pk}, &types.AttributeValueMemberS{Value: "bad#1"}
				other["pk"], other["sk"] = &types.AttributeValueMemberS{Value: "someone-else"}, &types.AttributeValueMemberS{Value: "x"}
			} else {
				bad["id"] = &types.AttributeValueMemberS{Value: "bad#1"}
				other = nil
			}
			for _, item := range []map[string]types.AttributeValue{bad, other} {
				if item != nil {
					_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item})
					require.NoError(t, err)
				}
			}

			tests := []struct {
				name      string
				opts      dynamostore.ScanOptions
				stopAfter int
				wantIDs   int
				wantBad   int
			}{
				{"all", dynamostore.ScanOptions{PageSize: 2}, 0, 7, 1},
				{"in progress", dynamostore.ScanOptions{Status: storage.StatusInProgress, PageSize: 3}, 0, 3, 1},
				{"stopped by the callback", dynamostore.ScanOptions{PageSize: 2}, 2, 2, -1},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var ids, corrupt int
					var last dynamostore.ScanProgress
					tt.opts.Progress = func(p dynamostore.ScanProgress) { last = p }
					err := store.Scan(ctx, tt.opts, func(rec storage.Record, err error) bool {
						if err != nil {
							require.ErrorIs(t, err, storage.ErrCorruptRecord)
							var ce *dynamostore.CorruptError
							require.ErrorAs(t, err, &ce)
							assert.Equal(t, "bad#1", ce.ID)
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
						assert.Equal(t, int64(8), last.Scanned, "every item of the partition is read, whatever the filter")
					} else {
						assert.Equal(t, tt.stopAfter, ids+corrupt)
					}
					assert.Equal(t, int64(ids+corrupt), last.Matched)
					assert.Positive(t, last.Pages)
				})
			}
		})
	}
}
