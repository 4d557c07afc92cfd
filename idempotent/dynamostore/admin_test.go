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

// Get, Delete and their errors are the conformance suite's (storetest's
// Admin cases, run by TestConformance in both layouts); these tests pin
// what is this store's own: what a corrupt item shows, and the Scan or
// Query of each layout.

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
	var ce *storage.CorruptRecordError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, id, ce.ID)
	assert.Equal(t, "N 1", ce.Fields["status"], "the item's status as stored: N 1")
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
				opts      storage.ScanOptions
				pageSize  int32
				stopAfter int
				wantIDs   int
				wantBad   int
			}{
				{"all", storage.ScanOptions{}, 2, 0, 7, 1},
				{"in progress", storage.ScanOptions{Status: storage.StatusInProgress}, 3, 0, 3, 1},
				{"stopped by the callback", storage.ScanOptions{}, 2, 2, 2, -1},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var ids, corrupt int
					var last storage.ScanProgress
					tt.opts.Progress = func(p storage.ScanProgress) { last = p }
					paged := dynamostore.New(client, table, func(o *dynamostore.Options) {
						*o = store.Options()
						o.ScanPageSize = tt.pageSize
					})
					err := paged.Scan(ctx, tt.opts, func(rec storage.Record, err error) bool {
						if err != nil {
							require.ErrorIs(t, err, storage.ErrCorruptRecord)
							var ce *storage.CorruptRecordError
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
					assert.Positive(t, paged.ScanReadUnits(), "DynamoDB reports the read units a Scan consumed")
				})
			}
		})
	}
}
