package idemkitcli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// The Redis Cluster tests run against the cluster at REDIS_CLUSTER_ADDRS
// (host:port,...; scripts/with-redis.sh starts one of 3 primaries). Without
// it they are skipped, unless IDEMKIT_REQUIRE_REDIS=1 says it must be there.

// clusterAddrs returns REDIS_CLUSTER_ADDRS, or skips (fails under
// IDEMKIT_REQUIRE_REDIS=1).
func clusterAddrs(t *testing.T) []string {
	t.Helper()
	v := os.Getenv("REDIS_CLUSTER_ADDRS")
	if v == "" {
		if os.Getenv("IDEMKIT_REQUIRE_REDIS") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_REDIS=1 but REDIS_CLUSTER_ADDRS is not set (run the tests under scripts/with-redis.sh)")
		}
		t.Skip("REDIS_CLUSTER_ADDRS not set; run under scripts/with-redis.sh for the Redis Cluster tests")
	}
	return strings.Split(v, ",")
}

// newCluster connects to the test cluster, and returns a key prefix of the
// test's own, whose keys are deleted when the test ends.
func newCluster(t *testing.T) (*redis.ClusterClient, []string, string) {
	t.Helper()
	addrs := clusterAddrs(t)
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cluster.Ping(ctx).Err(), "the Redis Cluster at REDIS_CLUSTER_ADDRS does not answer")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "idemkit-cli-test:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Unlink(ctx, iter.Val())
			}
			return nil
		})
		_ = cluster.Close()
	})
	return cluster, addrs, prefix
}

// run runs the command in process with the clock at now.
func run(t *testing.T, now time.Time, args ...string) result {
	t.Helper()
	return runFake(t, nil, now, args...)
}

// primaries returns the addresses of the cluster's primaries.
func primaries(t *testing.T, cluster *redis.ClusterClient) []string {
	t.Helper()
	var mu sync.Mutex
	var addrs []string
	require.NoError(t, cluster.ForEachMaster(t.Context(), func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		addrs = append(addrs, node.Options().Addr)
		return nil
	}))
	slices.Sort(addrs)
	return addrs
}

// onEachPrimary claims one INPROGRESS record (lease ending 2 s after now)
// of prefix "payments" on every primary of the cluster, and returns them by
// the primary's address.
func onEachPrimary(t *testing.T, cluster *redis.ClusterClient, store *redisstore.Store, now time.Time) map[string]storage.Record {
	t.Helper()
	ctx := t.Context()
	masters := len(primaries(t, cluster))
	require.Equal(t, 3, masters, "the test cluster has 3 primaries")
	recs := map[string]storage.Record{}
	for i := 0; len(recs) < masters; i++ {
		require.Less(t, i, 1000, "no key found for some primary")
		rec := inProgress("payments", "key-"+string(rune('a'+i%26))+strings.Repeat("x", i/26), now, now.Add(2*time.Second))
		node, err := cluster.MasterForKey(ctx, store.Key(rec.ID))
		require.NoError(t, err)
		addr := node.Options().Addr
		if _, ok := recs[addr]; ok {
			continue
		}
		res, err := store.Claim(ctx, rec, now)
		require.NoError(t, err)
		require.True(t, res.Claimed)
		recs[addr] = rec
	}
	return recs
}

// TestRedisCluster: the command reads, lists, deletes and checks records on
// every primary of a Redis Cluster, whether it is named as a cluster or by
// one node's URL. On a single-node client, records on the other primaries
// answer MOVED, list sees one node and check reads one node's policy.
func TestRedisCluster(t *testing.T) {
	cluster, addrs, prefix := newCluster(t)
	store := redisstore.New(cluster, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	now := time.Now()
	later := now.Add(time.Minute) // every lease has lapsed
	recs := onEachPrimary(t, cluster, store, now)

	clusterURL := "redis://" + addrs[0]
	for i, a := range addrs[1:] {
		clusterURL += map[bool]string{true: "?", false: "&"}[i == 0] + "addr=" + a
	}
	forms := []struct {
		name  string
		flags []string
	}{
		{"--redis-cluster addresses", []string{"--redis-cluster", strings.Join(addrs, ",")}},
		{"--redis-cluster one address", []string{"--redis-cluster", addrs[1]}},
		{"--redis-cluster URL", []string{"--redis-cluster", clusterURL}},
		{"--redis a node's URL", []string{"--redis", "redis://" + addrs[0]}},
		{"--redis another node's URL", []string{"--redis", "redis://" + addrs[2] + "/0"}},
	}
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			flags := append(form.flags, "--redis-key-prefix", prefix)
			with := func(args ...string) []string { return append(args, flags...) }
			for addr, rec := range recs {
				r := run(t, later, with("inspect", "--id", rec.ID)...)
				require.Equal(t, ExitOK, r.code, "record on primary %s: %s", addr, r.stderr)
				assert.Contains(t, r.stdout, "store    Redis Cluster at ")
				assert.Contains(t, r.stdout, "status   INPROGRESS")
				assert.Contains(t, r.stdout, "LAPSED")
			}

			r := run(t, later, with("list", "--in-progress", "--limit", "0", "--json")...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			var listed []map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
			var ids []string
			for _, l := range listed {
				ids = append(ids, l["id"].(string))
			}
			for addr, rec := range recs {
				assert.Contains(t, ids, rec.ID, "the record on primary %s", addr)
			}
			assert.Len(t, ids, len(recs))

			r = run(t, later, with("list", "--stuck", "--prefix", "payments")...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			for _, rec := range recs {
				assert.Contains(t, r.stdout, rec.ID)
			}
		})
	}

	// forget deletes on the primary that holds the record.
	for addr, rec := range recs {
		r := run(t, later, "forget", "--id", rec.ID, "--redis-cluster", strings.Join(addrs, ","), "--redis-key-prefix", prefix)
		require.Equal(t, ExitOK, r.code, "record on primary %s: %s", addr, r.stderr)
		assert.Contains(t, r.stdout, "forgotten")
		_, err := store.Get(t.Context(), rec.ID)
		require.ErrorIs(t, err, storage.ErrNotFound)
	}
	r := run(t, later, "list", "--in-progress", "--redis-cluster", strings.Join(addrs, ","), "--redis-key-prefix", prefix)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no records found")
}

// TestRedisClusterCheck: check reads the eviction policy of every primary
// and fails on the worst. Not parallel: it changes the cluster's settings.
func TestRedisClusterCheck(t *testing.T) {
	cluster, addrs, _ := newCluster(t)
	ctx := t.Context()
	setPolicy := func(ctx context.Context, node *redis.Client, policy string) error {
		return node.ConfigSet(ctx, "maxmemory-policy", policy).Err()
	}
	require.NoError(t, cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		return setPolicy(ctx, node, "noeviction")
	}))
	t.Cleanup(func() {
		_ = cluster.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
			return setPolicy(ctx, node, "noeviction")
		})
	})
	nodes := primaries(t, cluster)

	for _, flags := range [][]string{{"--redis-cluster", strings.Join(addrs, ",")}, {"--redis", "redis://" + addrs[0]}} {
		r := run(t, time.Now(), append([]string{"check"}, flags...)...)
		require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "ok   cluster state ok, 16384 of 16384 slots served")
		assert.Contains(t, r.stdout, "ok   maxmemory-policy noeviction on all 3 primaries")
		for _, p := range nodes {
			assert.Contains(t, r.stdout, "primary "+p+": noeviction")
		}
	}

	// One primary evicts, and not the one the command is pointed at.
	badAddr := nodes[0]
	if badAddr == addrs[0] {
		badAddr = nodes[1]
	}
	bad := redis.NewClient(&redis.Options{Addr: badAddr})
	t.Cleanup(func() { _ = bad.Close() })
	require.NoError(t, setPolicy(ctx, bad, "allkeys-lru"))
	host, port, _ := strings.Cut(badAddr, ":")
	for _, flags := range [][]string{{"--redis-cluster", strings.Join(addrs, ",")}, {"--redis", "redis://" + addrs[0]}} {
		r := run(t, time.Now(), append([]string{"check"}, flags...)...)
		assert.Equal(t, ExitCheck, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "FAIL maxmemory-policy allkeys-lru on primary "+badAddr+" (1 of 3 primaries evict)")
		assert.Contains(t, r.stdout, "primary "+badAddr+": allkeys-lru")
		assert.Contains(t, r.stdout, "fix: redis-cli -h "+host+" -p "+port+" CONFIG SET maxmemory-policy noeviction")
		assert.Contains(t, r.stderr, "1 problem(s) to fix")
	}
}

func TestRedisClusterFlags(t *testing.T) {
	t.Parallel()
	addrs := clusterAddrs(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not an address", []string{"--redis-cluster", "nonsense"}, `"nonsense" is not host:port`},
		{"an empty address", []string{"--redis-cluster", addrs[0] + ","}, `"" is not host:port`},
		{"bad URL parameter", []string{"--redis-cluster", "redis://" + addrs[0] + "?db=2"}, "--redis-cluster"},
		{"a cluster has database 0 only", []string{"--redis", "redis://" + addrs[0] + "/3"}, "database 0 only"},
		{"two stores", []string{"--redis-cluster", addrs[0], "--table", "t"}, "only one of --table, --redis, --redis-cluster and --postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, time.Now(), append([]string{"inspect", "--id", idempotent.RecordID("p", "", "k")}, tt.args...)...)
			assert.Equal(t, ExitUsage, r.code, r.stderr)
			assert.Contains(t, r.stderr, tt.want)
		})
	}
}
