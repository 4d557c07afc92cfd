package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Integration tests run against the server at REDIS_URL (scripts/with-redis.sh
// starts one). Without REDIS_URL they are skipped, unless
// IDEMKIT_REQUIRE_REDIS=1 says a server must be there. Every test uses its own
// key prefix, so tests (and packages) can share one server, and deletes its
// keys when it ends.
//
// Record times lie in the real future: Redis expires keys by its own clock,
// and the store refuses records already expired by it.

// redisOptions returns the client options from REDIS_URL, or skips the test.
func redisOptions(t testing.TB) *redis.Options {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_REDIS") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_REDIS=1 but REDIS_URL is not set (run the tests under scripts/with-redis.sh)")
		}
		t.Skip("REDIS_URL not set; run under scripts/with-redis.sh for the Redis integration tests")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	return opts
}

// newClient connects to the test server, with fn applied to the options.
func newClient(t testing.TB, fn func(*redis.Options)) *redis.Client {
	t.Helper()
	opts := redisOptions(t)
	if fn != nil {
		fn(opts)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at REDIS_URL does not answer: %v", err)
	}
	return client
}

// testPrefix returns a fresh key prefix and deletes its keys when the test ends.
func testPrefix(t testing.TB, client *redis.Client) string {
	t.Helper()
	prefix := "idemkit-test:" + randomHex(8) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = client.Del(ctx, keys...).Err()
		}
	})
	return prefix
}

// newStore returns a Store on its own key prefix, and the client under it.
func newStore(t testing.TB, optFns ...func(*redisstore.Options)) (*redisstore.Store, *redis.Client) {
	t.Helper()
	client := newClient(t, nil)
	prefix := testPrefix(t, client)
	optFns = append([]func(*redisstore.Options){func(o *redisstore.Options) { o.KeyPrefix = prefix }}, optFns...)
	return redisstore.New(client, optFns...), client
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// liveRecord is a fresh INPROGRESS record claimed at now.
func liveRecord(now time.Time) storage.Record {
	return storage.Record{
		ID:             "itest#" + randomHex(32),
		Status:         storage.StatusInProgress,
		ExpiresAt:      now.Add(time.Hour),
		LeaseExpiresAt: now.Add(90*time.Second + 123*time.Millisecond),
		Lease:          randomHex(16),
		Fingerprint:    "fp-" + randomHex(16),
		Version:        storage.RecordVersion,
	}
}

// claimNew claims a fresh record (see liveRecord) on store at now, and
// requires the claim to succeed.
func claimNew(t testing.TB, store *redisstore.Store, now time.Time) storage.Record {
	t.Helper()
	rec := liveRecord(now)
	_, err := store.Claim(ctxT(t), rec, now)
	require.NoError(t, err)
	return rec
}

// completedRecord is rec completed with data, expiring an hour after now.
func completedRecord(rec storage.Record, data []byte, now time.Time) storage.Record {
	rec.Status = storage.StatusCompleted
	rec.Data = data
	rec.ExpiresAt = now.Add(time.Hour)
	rec.LeaseExpiresAt = time.Time{}
	return rec
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
