package redisstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// finishCall is CompleteMany or ReleaseMany.
type finishCall func(s *redisstore.Store, ctx context.Context, recs []storage.Record) ([]error, error)

var finishCalls = []struct {
	name string
	call finishCall
}{
	{"CompleteMany", (*redisstore.Store).CompleteMany},
	{"ReleaseMany", (*redisstore.Store).ReleaseMany},
}

// finishRecords returns n records claimed on store, completed, the first
// lost of them under another lease than the stored record's.
func finishRecords(t *testing.T, store *redisstore.Store, now time.Time, n, lost int) []storage.Record {
	t.Helper()
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = completedRecord(claimNew(t, store, now), []byte("p"), now)
		if i < lost {
			recs[i].Lease = randomHex(16)
		}
	}
	return recs
}

// wantLostFirst checks that errs failed the first lost records with
// storage.ErrLeaseLost and no other.
func wantLostFirst(t *testing.T, errs []error, lost int) {
	t.Helper()
	for i, err := range errs {
		if i < lost {
			require.ErrorIs(t, err, storage.ErrLeaseLost, "record %d", i)
		} else {
			require.NoError(t, err, "record %d", i)
		}
	}
}

// TestFinishManyRoundTrips: on one server, N records are one pipeline of N
// EVALSHA, one round trip, whatever each outcome; with the script not
// cached, one pipeline more, of EVAL. A record too large to complete is not
// sent; no records, no call.
func TestFinishManyRoundTrips(t *testing.T) {
	t.Parallel()
	for _, fc := range finishCalls {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			hook := &pipelines{}
			opts := redisOptions(t)
			opts.PoolSize = 1
			client := redis.NewClient(opts)
			t.Cleanup(func() { _ = client.Close() })
			client.AddHook(hook)
			prefix := testPrefix(t, client)
			store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
			ctx := ctxT(t)
			require.NoError(t, store.LoadScripts(ctx))
			now := time.Now()
			const n, lost = 100, 10

			recs := finishRecords(t, store, now, n, lost)
			hook.take()
			errs, err := fc.call(store, ctx, recs)
			require.NoError(t, err)
			require.Len(t, errs, n)
			wantLostFirst(t, errs, lost)
			sent, alone := hook.take()
			assert.Equal(t, [][]string{names("evalsha", n)}, sent, "one pipeline")
			assert.Empty(t, alone)

			hook.noScript.Store(true)
			recs = finishRecords(t, store, now, n, lost)
			hook.take()
			errs, err = fc.call(store, ctx, recs)
			require.NoError(t, err)
			wantLostFirst(t, errs, lost)
			sent, alone = hook.take()
			assert.Equal(t, [][]string{names("evalsha", n), names("eval", n)}, sent, "NOSCRIPT, then EVAL")
			assert.Empty(t, alone)

			errs, err = fc.call(store, ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, errs)
			sent, alone = hook.take()
			assert.Empty(t, sent, "no records, no call")
			assert.Empty(t, alone, "no records, no call")
		})
	}
}

// TestCompleteManyTooLarge: a record past Options.MaxItemBytes fails alone
// with storage.ErrTooLarge and is not sent; the others are completed.
func TestCompleteManyTooLarge(t *testing.T) {
	t.Parallel()
	hook := &pipelines{}
	client := redis.NewClient(redisOptions(t))
	t.Cleanup(func() { _ = client.Close() })
	client.AddHook(hook)
	prefix := testPrefix(t, client)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	ctx := ctxT(t)
	require.NoError(t, store.LoadScripts(ctx))
	now := time.Now()
	recs := finishRecords(t, store, now, 3, 0)
	recs[1].Data = bytes.Repeat([]byte{'x'}, store.Options().MaxItemBytes)
	hook.take()

	errs, err := store.CompleteMany(ctx, recs)
	require.NoError(t, err)
	require.Len(t, errs, 3)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], storage.ErrTooLarge)
	require.NoError(t, errs[2])
	sent, _ := hook.take()
	assert.Equal(t, [][]string{names("evalsha", 2)}, sent, "the record too large is not sent")
	got, err := store.Get(ctx, recs[1].ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusInProgress, got.Status, "the record too large is left as it was")
	hook.take()

	// Every record too large: no pipeline at all.
	errs, err = store.CompleteMany(ctx, recs[1:2])
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], storage.ErrTooLarge)
	sent, alone := hook.take()
	assert.Empty(t, sent)
	assert.Empty(t, alone)
}

// TestClusterFinishManyPipelines: on a cluster, go-redis splits the
// pipeline by slot: one pipeline per primary, each of the EVALSHA of its
// own keys, and each record decided as alone.
func TestClusterFinishManyPipelines(t *testing.T) {
	t.Parallel()
	for _, fc := range finishCalls {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			hook := &pipelines{}
			client := newClusterClient(t, func(o *redis.ClusterOptions) {
				o.NewClient = func(opt *redis.Options) *redis.Client {
					c := redis.NewClient(opt)
					c.AddHook(hook)
					return c
				}
			})
			prefix := clusterPrefix(t, client)
			store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
			ctx := ctxT(t)
			require.NoError(t, store.LoadScripts(ctx))
			now := time.Now()
			const n, lost = 100, 10
			recs := finishRecords(t, store, now, n, lost)
			perNode := map[string]int{}
			for _, r := range recs {
				node, err := client.MasterForKey(ctx, store.Key(r.ID))
				require.NoError(t, err)
				perNode[node.Options().Addr]++
			}
			require.Len(t, perNode, 3, "100 random keys span the 3 primaries")
			hook.take()

			errs, err := fc.call(store, ctx, recs)
			require.NoError(t, err)
			require.Len(t, errs, n)
			wantLostFirst(t, errs, lost)
			sent, _ := hook.take()
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
		})
	}
}

// TestFinishManyWithoutPipelines: a client that cannot pipeline (a
// redis.Scripter of one's own) completes or releases the records one
// after another, each with its own error; duplicates and an ended context
// are refused before any call.
func TestFinishManyWithoutPipelines(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := completedRecord(liveRecord(now), []byte("p"), now), completedRecord(liveRecord(now), []byte("p"), now)
	tests := []struct {
		name    string
		call    finishCall
		replyB  []any // the script's reply for b; a's is {"ok"}
		wantErr error // b's
	}{
		{"CompleteMany", (*redisstore.Store).CompleteMany, []any{"lost"}, storage.ErrLeaseLost},
		{"ReleaseMany", (*redisstore.Store).ReleaseMany, []any{"done", "COMPLETED"}, storage.ErrAlreadyCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeScripter{t: t, evalSha: func(_ string, keys []string, _ []any) (any, error) {
				if keys[0] == "idemkit:"+b.ID {
					return tt.replyB, nil
				}
				return []any{"ok"}, nil
			}}
			store := redisstore.New(fake)
			errs, err := tt.call(store, context.Background(), []storage.Record{a, b})
			require.NoError(t, err)
			require.Len(t, errs, 2)
			require.NoError(t, errs[0])
			require.ErrorIs(t, errs[1], tt.wantErr)
			assert.Equal(t, []string{"evalsha", "evalsha"}, fake.calls)

			fake.calls = nil
			_, err = tt.call(store, context.Background(), []storage.Record{a, b, a})
			require.ErrorIs(t, err, storage.ErrDuplicateID)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = tt.call(store, ctx, []storage.Record{a})
			require.ErrorIs(t, err, context.Canceled)
			assert.Empty(t, fake.calls)
		})
	}
}
