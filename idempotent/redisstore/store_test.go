package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, proto := range []int{3, 2} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			client := newClient(t, func(o *redis.Options) { o.Protocol = proto })
			prefix := testPrefix(t, client)
			store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
			storetest.Run(t, store)
			storetest.RunAdmin(t, store, func(ctx context.Context, id string) error {
				return client.Set(ctx, store.Key(id), "not a hash", time.Hour).Err()
			})
		})
	}
}

// TestHashLayout pins the stored form: one hash per record under
// KeyPrefix+ID, DynamoDB's attribute names as fields, and a key expiry at the
// first millisecond after the record's expiration second.
func TestHashLayout(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := liveRecord(now)
	key := store.Key(rec.ID)
	require.Equal(t, store.Options().KeyPrefix+rec.ID, key)

	res, err := store.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, res.Claimed)
	assert.Equal(t, map[string]string{
		"status":                 "INPROGRESS",
		"expiration":             strconv.FormatInt(rec.ExpiresAt.Unix(), 10),
		"in_progress_expiration": strconv.FormatInt(rec.LeaseExpiresAt.UnixMilli(), 10),
		"lease":                  rec.Lease,
		"validation":             rec.Fingerprint,
		"version":                "1",
	}, client.HGetAll(ctx, key).Val())
	assertKeyExpiry(t, client, key, rec.ExpiresAt)

	done := completedRecord(rec, []byte("p\x00\xff{}"), now.Add(time.Minute))
	require.NoError(t, store.Complete(ctx, done))
	hash := client.HGetAll(ctx, key).Val()
	assert.Equal(t, map[string]string{
		"status":     "COMPLETED",
		"expiration": strconv.FormatInt(done.ExpiresAt.Unix(), 10),
		"lease":      rec.Lease,
		"validation": rec.Fingerprint,
		"data":       string(done.Data),
		"version":    "1",
	}, hash)
	assertKeyExpiry(t, client, key, done.ExpiresAt)

	// The size limit measures exactly what the hash holds.
	size := len(key)
	for f, v := range hash {
		size += len(f) + len(v)
	}
	assert.Equal(t, size, redisstore.CompletedSize(key, &done))

	// A completion without data removes the field.
	noData := done
	noData.Data = nil
	require.NoError(t, store.Complete(ctx, noData))
	assert.False(t, client.HExists(ctx, key, "data").Val(), "data field after a completion without data")

	// Optional fields are absent when empty.
	bare := liveRecord(now)
	bare.Fingerprint = ""
	_, err = store.Claim(ctx, bare, now)
	require.NoError(t, err)
	assert.False(t, client.HExists(ctx, store.Key(bare.ID), "validation").Val(), "validation field of a record without a fingerprint")
}

// assertKeyExpiry checks that key expires when the record expiring at expires
// first counts as expired: the second after its expiration second.
func assertKeyExpiry(t *testing.T, client *redis.Client, key string, expires time.Time) {
	t.Helper()
	want := (expires.Unix() + 1) * 1000
	got, err := client.Do(ctxT(t), "PEXPIRETIME", key).Int64()
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
		// Redis before 7.0: check the remaining time instead.
		ttl := client.PTTL(ctxT(t), key).Val()
		assert.InDelta(t, float64(want-time.Now().UnixMilli()), float64(ttl.Milliseconds()), 5000, "PTTL of %s", key)
		return
	}
	require.NoError(t, err)
	assert.Equal(t, want, got, "PEXPIRETIME of %s", key)
}

func TestKeyPrefix(t *testing.T) {
	t.Parallel()
	client := newClient(t, nil)
	assert.Equal(t, "idemkit:fn#ab", redisstore.New(client).Key("fn#ab"))
	assert.Equal(t, redisstore.DefaultKeyPrefix, redisstore.New(client).Options().KeyPrefix)
	assert.Equal(t, "fn#ab", redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = "" }).Key("fn#ab"))

	prefix := testPrefix(t, client)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix + "app:" })
	now := time.Now()
	rec := claimNew(t, store, now)
	assert.Equal(t, int64(1), client.Exists(ctxT(t), prefix+"app:"+rec.ID).Val())
}

// TestClaimOwnLeaseDoesNotWrite: a claim retried after its first response was
// lost finds its own record, completed or not, and leaves it as it is.
func TestClaimOwnLeaseDoesNotWrite(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	done := completedRecord(rec, []byte("p1"), now)
	require.NoError(t, store.Complete(ctx, done))

	res, err := store.Claim(ctx, rec, now.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true}, res)
	assert.Equal(t, "COMPLETED", client.HGet(ctx, store.Key(rec.ID), "status").Val())
}

// TestCorruptRecords writes hashes the store did not write and checks that a
// refused claim reports them as corrupt, never panics, and leaves them alone.
func TestCorruptRecords(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	now := time.Now()
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name  string
		hash  map[string]any
		field string // named in the error
	}{
		{"MissingStatus", map[string]any{"expiration": exp, "lease": "l", "version": "1"}, "status"},
		{"MissingExpiration", map[string]any{"status": "COMPLETED", "lease": "l", "version": "1"}, "expiration"},
		{"MissingLease", map[string]any{"status": "COMPLETED", "expiration": exp, "version": "1"}, "lease"},
		{"TextExpiration", map[string]any{"status": "COMPLETED", "expiration": "soon", "lease": "l", "version": "1"}, "expiration"},
		{"ExponentExpiration", map[string]any{"status": "COMPLETED", "expiration": "1e3", "lease": "l", "version": "1"}, "expiration"},
		{"PlusSignExpiration", map[string]any{"status": "COMPLETED", "expiration": "+" + exp, "lease": "l", "version": "1"}, "expiration"},
		{"HugeExpiration", map[string]any{"status": "COMPLETED", "expiration": "99999999999999999999999", "lease": "l", "version": "1"}, "expiration"},
		{"BadLeaseEnd", map[string]any{"status": "INPROGRESS", "expiration": exp, "in_progress_expiration": "0x10", "lease": "l", "version": "1"}, "in_progress_expiration"},
		{"BadVersion", map[string]any{"status": "COMPLETED", "expiration": exp, "lease": "l", "version": "one"}, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			rec := liveRecord(now)
			key := store.Key(rec.ID)
			require.NoError(t, client.HSet(ctx, key, tc.hash).Err())
			require.NoError(t, client.Expire(ctx, key, time.Hour).Err())
			before := client.HGetAll(ctx, key).Val()

			res, err := store.Claim(ctx, rec, now)
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			assert.Contains(t, err.Error(), strconv.Quote(tc.field))
			assert.False(t, res.Claimed)
			assert.Equal(t, before, client.HGetAll(ctx, key).Val(), "the corrupt record was modified")
		})
	}

	t.Run("UnknownFieldsAndVersionAreReturned", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		rec := liveRecord(now)
		require.NoError(t, client.HSet(ctx, store.Key(rec.ID), "status", "COMPLETED", "expiration", exp,
			"lease", "l", "version", "2", "future_field", "x").Err())
		res, err := store.Claim(ctx, rec, now)
		require.NoError(t, err)
		require.NotNil(t, res.Existing)
		assert.Equal(t, 2, res.Existing.Version, "a foreign version is returned as stored, for the wrapper to refuse")
	})

	t.Run("LapsedCorruptRecordIsTakenOver", func(t *testing.T) {
		// As in DynamoDB, the claim condition reads only status, expiration,
		// the lease end, the lease and the version: a record of this format
		// whose lease lapsed is replaced even if another field (here steps
		// the claim would not keep) is unreadable.
		t.Parallel()
		ctx := ctxT(t)
		rec := liveRecord(now)
		key := store.Key(rec.ID)
		require.NoError(t, client.HSet(ctx, key, "status", "INPROGRESS", "expiration", exp,
			"in_progress_expiration", strconv.FormatInt(now.Add(-time.Second).UnixMilli(), 10), "lease", "other", "version", "1",
			"steps", "garbage").Err())
		res, err := store.Claim(ctx, rec, now)
		require.NoError(t, err)
		assert.Equal(t, storage.ClaimResult{Claimed: true, TookOver: true}, res)
		assert.False(t, client.HExists(ctx, key, "steps").Val())
	})

	t.Run("LapsedRecordOfUnreadableVersionIsNotTakenOver", func(t *testing.T) {
		// Not known to be of this format: foreign, refused until it expires.
		t.Parallel()
		ctx := ctxT(t)
		rec := liveRecord(now)
		key := store.Key(rec.ID)
		require.NoError(t, client.HSet(ctx, key, "status", "INPROGRESS", "expiration", exp,
			"in_progress_expiration", strconv.FormatInt(now.Add(-time.Second).UnixMilli(), 10), "lease", "other", "version", "?").Err())
		before := client.HGetAll(ctx, key).Val()
		res, err := store.Claim(ctx, rec, now)
		require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
		assert.False(t, res.Claimed)
		assert.Equal(t, before, client.HGetAll(ctx, key).Val())
	})
}

// TestForeignKeyType: a key of another Redis type under a record's name is
// reported and never overwritten or deleted.
func TestForeignKeyType(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := liveRecord(now)
	key := store.Key(rec.ID)
	require.NoError(t, client.Set(ctx, key, "not a record", time.Hour).Err())

	_, err := store.Claim(ctx, rec, now)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.Contains(t, err.Error(), "string")

	err = store.Complete(ctx, completedRecord(rec, []byte("p"), now))
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)

	err = store.Release(ctx, rec.ID, rec.Lease)
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)

	assert.Equal(t, "not a record", client.Get(ctx, key).Val())
}

// TestExpiryInPast: a record already expired by the server's clock is
// refused, not written (Redis would delete it at once, and a claim that
// vanished would let a duplicate run).
func TestExpiryInPast(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	past := time.Now().Add(-48 * time.Hour) // a fake clock, two days behind

	rec := liveRecord(past)
	_, err := store.Claim(ctx, rec, past)
	require.ErrorIs(t, err, redisstore.ErrExpiryInPast)
	assert.Equal(t, int64(0), client.Exists(ctx, store.Key(rec.ID)).Val())

	now := time.Now()
	rec = claimNew(t, store, now)
	err = store.Complete(ctx, completedRecord(rec, []byte("p"), past))
	require.ErrorIs(t, err, redisstore.ErrExpiryInPast)
	assert.Equal(t, "INPROGRESS", client.HGet(ctx, store.Key(rec.ID), "status").Val(), "the record after a refused completion")

	// A refused claim is answered before the expiry is looked at.
	late := rec
	late.Lease = randomHex(16)
	late.ExpiresAt = past
	res, err := store.Claim(ctx, late, now)
	require.NoError(t, err)
	require.NotNil(t, res.Existing)
	assert.Equal(t, rec.Lease, res.Existing.Lease)
}

func TestTooLargeDefault(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	key := store.Key(rec.ID)

	// The largest data that fits the default limit is stored; one byte more is refused.
	probe := completedRecord(rec, nil, now)
	room := storage.DefaultMaxItemBytes - redisstore.CompletedSize(key, &probe) - len("data")
	fits := completedRecord(rec, bytes.Repeat([]byte{'x'}, room), now)
	require.NoError(t, store.Complete(ctx, fits))
	over := completedRecord(rec, bytes.Repeat([]byte{'y'}, room+1), now)
	err := store.Complete(ctx, over)
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Equal(t, int64(room), client.HStrLen(ctx, key, "data").Val())
	assert.NotContains(t, client.HGet(ctx, key, "data").Val(), "y")
}

func TestMaxItemBytesOption(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, func(o *redisstore.Options) { o.MaxItemBytes = 1 << 20 })
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	require.NoError(t, store.Complete(ctx, completedRecord(rec, bytes.Repeat([]byte{'x'}, 500<<10), now)))
	err := store.Complete(ctx, completedRecord(rec, bytes.Repeat([]byte{'x'}, 1<<20), now))
	require.ErrorIs(t, err, storage.ErrTooLarge)
}

func TestReleaseReportsOtherOwnersStatus(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	err := store.Release(ctx, rec.ID, "someone-else")
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	assert.Contains(t, err.Error(), "INPROGRESS")
}

func TestLoadScripts(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	require.NoError(t, store.LoadScripts(ctx))
	exists, err := client.ScriptExists(ctx, redisstore.ScriptHashes()...).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true, true, true}, exists)
}

func TestServerErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	client := newClient(t, nil)
	require.NoError(t, client.Close())
	store := redisstore.New(client)
	now := time.Now()
	rec := liveRecord(now)
	_, err := store.Claim(ctxT(t), rec, now)
	require.ErrorIs(t, err, redis.ErrClosed)
	assert.True(t, strings.HasPrefix(err.Error(), "redisstore: claim: "), err.Error())
	for _, err := range []error{
		store.Complete(ctxT(t), completedRecord(rec, nil, now)),
		store.Release(ctxT(t), rec.ID, rec.Lease),
	} {
		require.ErrorIs(t, err, redis.ErrClosed)
		assert.False(t, errors.Is(err, storage.ErrLeaseLost))
	}
}

// TestFarFutureExpiry: expiry times beyond what Lua numbers hold exactly are
// stored as given and the key's expiry is capped, not overflowed.
func TestFarFutureExpiry(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	for _, expires := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Unix(1<<62, 0),
	} {
		rec := liveRecord(now)
		rec.ExpiresAt = expires
		rec.LeaseExpiresAt = now.Add(48 * time.Hour)
		res, err := store.Claim(ctx, rec, now)
		require.NoError(t, err)
		require.True(t, res.Claimed)
		got, err := store.Claim(ctx, liveRecord(now), now) // another key: the store still works
		require.NoError(t, err)
		require.True(t, got.Claimed)
		rival := rec
		rival.Lease = randomHex(16)
		res, err = store.Claim(ctx, rival, now.Add(24*time.Hour))
		require.NoError(t, err)
		require.NotNil(t, res.Existing, "a record expiring at %v is live a day later", expires)
		assert.Equal(t, expires.Unix(), res.Existing.ExpiresAt.Unix())
		assert.Equal(t, redisstore.KeyExpiryMs(expires), client.Do(ctx, "PEXPIRETIME", store.Key(rec.ID)).Val())
	}
}
