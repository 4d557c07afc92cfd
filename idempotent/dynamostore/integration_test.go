package dynamostore_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
	"github.com/idemkit/idemkit/internal/localddb"
)

// Integration tests against DynamoDB Local. Record times lie in the real
// future, so DynamoDB Local's TTL (which deletes expired items within about a
// second) never removes a record under a running test.

func TestConformance(t *testing.T) {
	t.Parallel()
	client := localddb.TestClient(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newLocalStore(t, client, l)
			storetest.Run(t, store)
		})
	}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "itest#" + hex.EncodeToString(b[:])
}

// liveRecord is a fresh INPROGRESS record claimed at now.
func liveRecord(now time.Time) storage.Record {
	return storage.Record{
		ID:             randomID(),
		Status:         storage.StatusInProgress,
		ExpiresAt:      now.Add(time.Hour),
		LeaseExpiresAt: now.Add(90 * time.Second).Add(123 * time.Millisecond),
		Lease:          randomID()[6:],
		Fingerprint:    "fp-" + randomID()[6:],
		Version:        storage.RecordVersion,
	}
}

func rawItem(t *testing.T, client *dynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

func TestLocalItemLayout(t *testing.T) {
	t.Parallel()
	client := localddb.TestClient(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, table := newLocalStore(t, client, l)
			now := time.Now()
			rec := liveRecord(now)
			dbKey := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: rec.ID}}
			if l.composite {
				dbKey = map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: store.Options().StaticPartitionKey},
					"sk": &types.AttributeValueMemberS{Value: rec.ID},
				}
			}
			key := showItem(dbKey)

			res, err := store.Claim(t.Context(), rec, now)
			require.NoError(t, err)
			require.True(t, res.Claimed)
			want := map[string]string{
				"status":                 "S(INPROGRESS)",
				"expiration":             "N(" + strconv.FormatInt(rec.ExpiresAt.Unix(), 10) + ")",
				"in_progress_expiration": "N(" + strconv.FormatInt(rec.LeaseExpiresAt.UnixMilli(), 10) + ")",
				"lease":                  "S(" + rec.Lease + ")",
				"validation":             "S(" + rec.Fingerprint + ")",
				"version":                "N(1)",
			}
			for k, v := range key {
				want[k] = v
			}
			assert.Equal(t, want, showItem(rawItem(t, client, table, dbKey)))

			done := rec
			done.Status, done.LeaseExpiresAt, done.Data, done.ExpiresAt = storage.StatusCompleted, time.Time{}, []byte("p{}"), now.Add(2*time.Hour)
			require.NoError(t, store.Complete(t.Context(), done))
			delete(want, "in_progress_expiration")
			want["status"] = "S(COMPLETED)"
			want["data"] = "B(p{})"
			want["expiration"] = "N(" + strconv.FormatInt(done.ExpiresAt.Unix(), 10) + ")"
			assert.Equal(t, want, showItem(rawItem(t, client, table, dbKey)))
		})
	}
}

func TestLocalLostResponses(t *testing.T) {
	t.Parallel()
	counter := &callCounter{}
	loser := &responseLoser{}
	client := localddb.TestClient(t, withMiddleware(counter.apiOption, loser.apiOption), quickRetries)
	store, _ := newLocalStore(t, client, layouts[0])
	now := time.Now()
	rec := liveRecord(now)
	counter.take()

	// The claim is written, its response lost, the SDK retries, the retry
	// fails its condition on our own item: the claim is ours.
	loser.arm("PutItem")
	res, err := store.Claim(t.Context(), rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true}, res)
	assert.Equal(t, []string{"PutItem", "PutItem"}, counter.take())

	// A retried completion succeeds again (it is fenced by the lease alone).
	done := rec
	done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p1")
	loser.arm("UpdateItem")
	require.NoError(t, store.Complete(t.Context(), done))
	assert.Equal(t, []string{"UpdateItem", "UpdateItem"}, counter.take())

	// A retried release finds the item gone: released.
	rec2 := liveRecord(now)
	_, err = store.Claim(t.Context(), rec2, now)
	require.NoError(t, err)
	counter.take()
	loser.arm("DeleteItem")
	require.NoError(t, store.Release(t.Context(), rec2.ID, rec2.Lease))
	assert.Equal(t, []string{"DeleteItem", "DeleteItem"}, counter.take())
	res, err = store.Claim(t.Context(), liveRecord(now), now)
	require.NoError(t, err)
	assert.True(t, res.Claimed)
}

// TestLocalItemSizeLimit checks the size estimate against DynamoDB's own
// count: with the store's check lifted, an item of exactly 400 KB by the
// estimate is accepted and one byte more is refused by DynamoDB, which the
// store reports as storage.ErrTooLarge too.
func TestLocalItemSizeLimit(t *testing.T) {
	t.Parallel()
	client := localddb.TestClient(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			table := createTable(t, client, l.composite)
			opts := func(limit int) []func(*dynamostore.Options) {
				o := []func(*dynamostore.Options){func(o *dynamostore.Options) { o.MaxItemBytes = limit }}
				if l.composite {
					o = append(o, compositeOptions)
				}
				return o
			}
			checked := dynamostore.New(client, table, opts(0)...)
			unchecked := dynamostore.New(client, table, opts(1<<30)...)
			now := time.Now()

			// fill returns a completion whose item is exactly size bytes
			// by the store's estimate.
			fill := func(s *dynamostore.Store, rec storage.Record, size int) storage.Record {
				done := rec
				done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte{'p'}
				done.Data = bytes.Repeat([]byte{'x'}, size-dynamostore.CompletedSize(s, done)+1)
				return done
			}
			for _, tt := range []struct {
				name  string
				store *dynamostore.Store
				size  int
				fits  bool
			}{
				{"exactly 400 KB fits", checked, storage.DefaultMaxItemBytes, true},
				{"one byte more is refused by the store", checked, storage.DefaultMaxItemBytes + 1, false},
				{"one byte more is refused by DynamoDB", unchecked, storage.DefaultMaxItemBytes + 1, false},
			} {
				rec := liveRecord(now)
				_, err := tt.store.Claim(t.Context(), rec, now)
				require.NoError(t, err)
				err = tt.store.Complete(t.Context(), fill(tt.store, rec, tt.size))
				if tt.fits {
					assert.NoError(t, err, tt.name)
				} else {
					assert.ErrorIs(t, err, storage.ErrTooLarge, tt.name)
				}
				if tt.store == unchecked {
					assert.ErrorContains(t, err, "ValidationException", "refused by DynamoDB, not by the estimate")
				}
			}
		})
	}
}

func TestLocalCorruptRecords(t *testing.T) {
	t.Parallel()
	client := localddb.TestClient(t)
	store, table := newLocalStore(t, client, layouts[0])
	now := time.Now()
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)

	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item})
		require.NoError(t, err)
	}

	// A status stored as a number.
	bad := liveRecord(now)
	put(map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: bad.ID}, "status": &types.AttributeValueMemberN{Value: "1"},
		"expiration": &types.AttributeValueMemberN{Value: exp}, "lease": &types.AttributeValueMemberS{Value: "x"},
	})
	_, err := store.Claim(t.Context(), bad, now)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.Contains(t, err.Error(), `attribute "status" is N, want S`)

	// A record without a version attribute: version 0, never replayed.
	foreign := liveRecord(now)
	put(map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: foreign.ID}, "status": &types.AttributeValueMemberS{Value: "COMPLETED"},
		"expiration": &types.AttributeValueMemberN{Value: exp}, "lease": &types.AttributeValueMemberS{Value: "x"},
	})
	res, err := store.Claim(t.Context(), foreign, now)
	require.NoError(t, err)
	require.NotNil(t, res.Existing)
	assert.Equal(t, 0, res.Existing.Version, "no version attribute: version 0, refused by the wrapper as foreign")
}
