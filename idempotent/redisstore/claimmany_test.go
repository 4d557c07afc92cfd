package redisstore_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// pipelines is a go-redis hook that records the commands of every
// pipeline a client sends (the names, one slice per pipeline) and every
// command sent alone. With noScript set, it answers the next pipeline
// itself, every command NOSCRIPT, as a server without the scripts cached.
type pipelines struct {
	mu       sync.Mutex
	sent     [][]string
	alone    []string
	noScript atomic.Bool
}

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.mu.Lock()
		p.alone = append(p.alone, cmd.Name())
		p.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, cmd := range cmds {
			names[i] = cmd.Name()
		}
		p.mu.Lock()
		p.sent = append(p.sent, names)
		p.mu.Unlock()
		if p.noScript.CompareAndSwap(true, false) {
			err := serverError("NOSCRIPT No matching script. Please use EVAL.")
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// take returns the pipelines and lone commands since the last take.
func (p *pipelines) take() (sent [][]string, alone []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sent, alone = p.sent, p.alone
	p.sent, p.alone = nil, nil
	return sent, alone
}

// names returns n copies of name.
func names(name string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = name
	}
	return s
}

// heldRecords returns n fresh records, the first held of them already
// claimed by another lease.
func heldRecords(t *testing.T, store *redisstore.Store, now time.Time, n, held int) []storage.Record {
	t.Helper()
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = liveRecord(now)
		if i < held {
			_, err := store.Claim(ctxT(t), recs[i], now)
			require.NoError(t, err)
			recs[i].Lease = randomHex(16)
		}
	}
	return recs
}

// wantClaimedAfter checks that out claimed every record but the first held.
func wantClaimedAfter(t *testing.T, out []storage.ClaimOutcome, held int) {
	t.Helper()
	for i, o := range out {
		require.NoError(t, o.Err, "record %d", i)
		assert.Equal(t, i >= held, o.Result.Claimed, "record %d claimed", i)
	}
}

// TestClaimManyRoundTrips: on one server, N records are one pipeline of N
// EVALSHA, one round trip, whatever each outcome; with the script not
// cached, one pipeline more, of EVAL.
func TestClaimManyRoundTrips(t *testing.T) {
	t.Parallel()
	hook := &pipelines{}
	trips := &counter{}
	opts := redisOptions(t)
	opts.PoolSize = 1 // one connection: its writes are the round trips
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	client.AddHook(trips)
	client.AddHook(hook)
	prefix := testPrefix(t, client)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	ctx := ctxT(t)
	require.NoError(t, store.LoadScripts(ctx))
	now := time.Now()
	const n, held = 100, 10
	recs := heldRecords(t, store, now, n, held)
	hook.take()
	trips.take()

	out, err := store.ClaimMany(ctx, recs, now)
	require.NoError(t, err)
	require.Len(t, out, n)
	wantClaimedAfter(t, out, held)
	sent, alone := hook.take()
	assert.Equal(t, [][]string{names("evalsha", n)}, sent, "one pipeline")
	assert.Empty(t, alone)
	_, writes := trips.take()
	t.Logf("%d records: %d pipeline(s), %d network write(s) of one round trip", n, len(sent), writes)

	// The same records again: each is the caller's own, or still refused.
	out, err = store.ClaimMany(ctx, recs, now)
	require.NoError(t, err)
	wantClaimedAfter(t, out, held)
	sent, _ = hook.take()
	assert.Len(t, sent, 1)

	hook.noScript.Store(true)
	more := heldRecords(t, store, now, n, held)
	hook.take()
	out, err = store.ClaimMany(ctx, more, now)
	require.NoError(t, err)
	wantClaimedAfter(t, out, held)
	sent, alone = hook.take()
	assert.Equal(t, [][]string{names("evalsha", n), names("eval", n)}, sent, "NOSCRIPT, then EVAL")
	assert.Empty(t, alone)

	out, err = store.ClaimMany(ctx, nil, now)
	require.NoError(t, err)
	assert.Empty(t, out)
	sent, alone = hook.take()
	assert.Empty(t, sent, "no records, no call")
	assert.Empty(t, alone, "no records, no call")
}

// TestClusterClaimManyPipelines: on a cluster, go-redis splits the
// pipeline by slot: one pipeline per primary, each of the EVALSHA of its
// own keys.
func TestClusterClaimManyPipelines(t *testing.T) {
	t.Parallel()
	hook := &pipelines{}
	client := newClusterClient(t, func(o *redis.ClusterOptions) {
		o.NewClient = func(opt *redis.Options) *redis.Client {
			c := redis.NewClient(opt)
			c.AddHook(hook) // each node's pipelines
			return c
		}
	})
	prefix := clusterPrefix(t, client)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	ctx := ctxT(t)
	require.NoError(t, store.LoadScripts(ctx))
	now := time.Now()
	const n, held = 100, 10
	recs := heldRecords(t, store, now, n, held)
	perNode := map[string]int{}
	for _, r := range recs {
		node, err := client.MasterForKey(ctx, store.Key(r.ID))
		require.NoError(t, err)
		perNode[node.Options().Addr]++
	}
	require.Len(t, perNode, 3, "100 random keys span the 3 primaries")
	hook.take()

	out, err := store.ClaimMany(ctx, recs, now)
	require.NoError(t, err)
	require.Len(t, out, n)
	wantClaimedAfter(t, out, held)
	sent, _ := hook.take() // lone commands: the client's own (CLUSTER SLOTS)
	var sizes []int
	for _, p := range sent {
		assert.Equal(t, names("evalsha", len(p)), p)
		sizes = append(sizes, len(p))
	}
	want := make([]int, 0, len(perNode))
	for _, k := range perNode {
		want = append(want, k)
	}
	assert.ElementsMatch(t, want, sizes, "one pipeline per primary, of its keys")
	t.Logf("%d records on a cluster: pipelines of %v commands", n, sizes)
}

// BenchmarkClaimMany compares ClaimMany of 100 new records with 100
// sequential Claims against the server at REDIS_URL: on loopback, and with
// 5 ms added to each round trip.
func BenchmarkClaimMany(b *testing.B) {
	for _, tc := range []struct {
		name    string
		latency time.Duration
	}{{"loopback", 0}, {"5ms-per-round-trip", 5 * time.Millisecond}} {
		opts := redisOptions(b)
		opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &slowConn{Conn: conn, latency: tc.latency}, nil
		}
		client := redis.NewClient(opts)
		b.Cleanup(func() { _ = client.Close() })
		prefix := testPrefix(b, client)
		store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
		ctx := ctxT(b)
		require.NoError(b, store.LoadScripts(ctx))
		now := time.Now()
		batch := func() []storage.Record {
			recs := make([]storage.Record, 100)
			for i := range recs {
				recs[i] = liveRecord(now)
			}
			return recs
		}
		b.Run(tc.name+"/ClaimMany-100", func(b *testing.B) {
			for b.Loop() {
				out, err := store.ClaimMany(ctx, batch(), now)
				if err != nil || !out[99].Result.Claimed {
					b.Fatal(err, out[99])
				}
			}
		})
		b.Run(tc.name+"/Claim-100-sequential", func(b *testing.B) {
			for b.Loop() {
				for _, rec := range batch() {
					if res, err := store.Claim(ctx, rec, now); err != nil || !res.Claimed {
						b.Fatal(err, res)
					}
				}
			}
		})
	}
}

// slowConn adds latency to each round trip: to the first read after a
// write, as a network between the client and the server would.
type slowConn struct {
	net.Conn
	latency time.Duration
	wrote   atomic.Bool
}

func (c *slowConn) Write(b []byte) (int, error) {
	c.wrote.Store(true)
	return c.Conn.Write(b)
}

func (c *slowConn) Read(b []byte) (int, error) {
	if c.wrote.Swap(false) {
		time.Sleep(c.latency)
	}
	return c.Conn.Read(b)
}

// TestClaimManyWithoutPipelines: a client that cannot pipeline (a
// redis.Scripter of one's own) claims the records one after another, each
// with its own outcome; duplicates and an ended context are refused before
// any call.
func TestClaimManyWithoutPipelines(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := liveRecord(now), liveRecord(now)
	fake := &fakeScripter{t: t, evalSha: func(_ string, keys []string, _ []any) (any, error) {
		if keys[0] == "idemkit:"+b.ID {
			return []any{"wrongtype", "string"}, nil
		}
		return []any{"claimed", int64(0), ""}, nil
	}}
	store := redisstore.New(fake)
	out, err := store.ClaimMany(context.Background(), []storage.Record{a, b}, now)
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, storage.ClaimOutcome{Result: storage.ClaimResult{Claimed: true}}, out[0])
	require.ErrorIs(t, out[1].Err, storage.ErrCorruptRecord)
	assert.Equal(t, []string{"evalsha", "evalsha"}, fake.calls)

	fake.calls = nil
	_, err = store.ClaimMany(context.Background(), []storage.Record{a, b, a}, now)
	require.ErrorIs(t, err, storage.ErrDuplicateID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = store.ClaimMany(ctx, []storage.Record{a}, now)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, fake.calls)
}
