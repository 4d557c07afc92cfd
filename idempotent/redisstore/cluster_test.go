package redisstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

// The Redis Cluster tests run against the cluster at REDIS_CLUSTER_ADDRS
// (host:port,host:port,...; scripts/with-redis.sh starts one of 3 primaries
// on loopback). Without it they are skipped, unless IDEMKIT_REQUIRE_REDIS=1
// says it must be there.

// newClusterClient connects to the test cluster, with fn applied to the
// options.
func newClusterClient(t testing.TB, fn func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	addrs := os.Getenv("REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		if os.Getenv("IDEMKIT_REQUIRE_REDIS") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_REDIS=1 but REDIS_CLUSTER_ADDRS is not set (run the tests under scripts/with-redis.sh)")
		}
		t.Skip("REDIS_CLUSTER_ADDRS not set; run under scripts/with-redis.sh for the Redis Cluster tests")
	}
	opts := &redis.ClusterOptions{Addrs: strings.Split(addrs, ",")}
	if fn != nil {
		fn(opts)
	}
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("the Redis Cluster at REDIS_CLUSTER_ADDRS does not answer: %v", err)
	}
	return client
}

// clusterPrefix returns a fresh key prefix and deletes its keys, on every
// primary, when the test ends.
func clusterPrefix(t testing.TB, client *redis.ClusterClient) string {
	t.Helper()
	prefix := "idemkit-test:" + randomHex(8) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Unlink(ctx, iter.Val()) // one key at a time: keys of several slots
			}
			return nil
		})
	})
	return prefix
}

// TestClusterConformance runs the store's conformance suite through a
// cluster client: every script touches one key, so it runs on the primary
// that holds the key's slot.
func TestClusterConformance(t *testing.T) {
	t.Parallel()
	for _, proto := range []int{3, 2} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			client := newClusterClient(t, func(o *redis.ClusterOptions) { o.Protocol = proto })
			prefix := clusterPrefix(t, client)
			store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
			require.NoError(t, store.LoadScripts(ctxT(t)), "loaded into every primary")
			storetest.Run(t, store)
		})
	}
}

// TestClusterAdmin: the operator methods on a cluster. Get and Delete run
// on the primary of the record's slot; Scan visits every primary.
func TestClusterAdmin(t *testing.T) {
	t.Parallel()
	client := newClusterClient(t, nil)
	prefix := clusterPrefix(t, client)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	ctx := ctxT(t)
	now := time.Now()

	// Records until every primary holds at least two.
	var mu sync.Mutex
	primaries := map[string]int{}
	require.NoError(t, client.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		primaries[node.Options().Addr] = 0
		return nil
	}))
	require.Len(t, primaries, 3, "the test cluster has 3 primaries")
	full := func() bool {
		for _, n := range primaries {
			if n < 2 {
				return false
			}
		}
		return true
	}
	byID := map[string]storage.Record{}
	for i := 0; !full(); i++ {
		require.Less(t, i, 1000)
		rec := claimNew(t, store, now)
		if i%2 == 1 {
			rec.ID = "other#" + strings.TrimPrefix(rec.ID, "itest#")
			_, err := store.Claim(ctx, rec, now)
			require.NoError(t, err)
		}
		node, err := client.MasterForKey(ctx, store.Key(rec.ID))
		require.NoError(t, err)
		primaries[node.Options().Addr]++
		byID[rec.ID] = rec
	}
	// claimNew's own record of the odd rounds is not counted: read them back
	// through the scan, as the others.
	var all []storage.Record
	require.NoError(t, store.Scan(ctx, storage.ScanOptions{}, func(rec storage.Record, err error) bool {
		require.NoError(t, err)
		all = append(all, rec)
		return true
	}))
	for id := range byID {
		assert.True(t, containsID(all, id), "Scan misses %s", id)
	}

	tests := []struct {
		name     string
		idPrefix string
		want     func(id string) bool
	}{
		{"every record", "", func(string) bool { return true }},
		{"one prefix", "other#", func(id string) bool { return strings.HasPrefix(id, "other#") }},
		{"a glob in the prefix matches itself only", "oth*#", func(string) bool { return false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []storage.Record
			var last storage.ScanProgress
			require.NoError(t, store.Scan(ctx, storage.ScanOptions{IDPrefix: tt.idPrefix, Progress: func(p storage.ScanProgress) { last = p }},
				func(rec storage.Record, err error) bool {
					require.NoError(t, err)
					got = append(got, rec)
					return true
				}))
			want := 0
			for _, rec := range all {
				if tt.want(rec.ID) {
					want++
					assert.True(t, containsID(got, rec.ID), rec.ID)
				}
			}
			assert.Len(t, got, want)
			assert.GreaterOrEqual(t, last.Pages, 3, "one SCAN or more on each primary")
		})
	}

	// Get and Delete on every primary.
	for _, rec := range all {
		got, err := store.Get(ctx, rec.ID)
		require.NoError(t, err)
		require.NoError(t, store.Delete(ctx, got))
		_, err = store.Get(ctx, rec.ID)
		require.ErrorIs(t, err, storage.ErrNotFound)
	}
}

func containsID(recs []storage.Record, id string) bool {
	for _, r := range recs {
		if r.ID == id {
			return true
		}
	}
	return false
}
