package pgstore_test

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// TestClaimManyRoundTrips: any number of records is one statement, one
// round trip, new keys and refused claims alike (the refusing records come
// with the answer); a record whose ID PostgreSQL cannot hold fails alone,
// before the call; no records, no call.
func TestClaimManyRoundTrips(t *testing.T) {
	t.Parallel()
	pool, writes := countingPool(t)
	store := newTable(t, pool)
	ctx := ctxT(t)
	now := time.Now()
	const n, held = 100, 10
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = liveRecord(now)
		if i < held {
			recs[i] = claimNew(t, store, now)
			recs[i].Lease = randomHex(16)
		}
	}
	recs[n-1].ID = "bad\xff#" + randomHex(32)

	tests := []struct {
		name       string
		recs       []storage.Record
		wantTrips  int64
		wantClaims int // claimed, counted from the end of recs
	}{
		{"new keys and refused claims", recs, 1, n - held - 1},
		{"the same again: own leases and refusals", recs, 1, n - held - 1},
		{"no records", nil, 0, 0},
	}
	for _, tt := range tests {
		before := writes.Load()
		out, err := store.ClaimMany(ctx, tt.recs, now)
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.wantTrips, writes.Load()-before, "%s: round trips", tt.name)
		require.Len(t, out, len(tt.recs), tt.name)
		claimed := 0
		for i, o := range out {
			switch {
			case i == n-1:
				require.ErrorIs(t, o.Err, pgstore.ErrInvalidText, "%s: the record of an invalid ID", tt.name)
			case i < held:
				require.NoError(t, o.Err)
				require.NotNil(t, o.Result.Existing, "%s: record %d", tt.name, i)
				assert.Equal(t, recs[i].ID, o.Result.Existing.ID)
			default:
				require.NoError(t, o.Err)
				require.True(t, o.Result.Claimed, "%s: record %d", tt.name, i)
				claimed++
			}
		}
		assert.Equal(t, tt.wantClaims, claimed, tt.name)
	}
}

// TestClaimManyOverlappingCallsRace runs many rounds of concurrent calls
// over random overlapping subsets of a few keys, some already stored and
// lapsed, with single Claims among them: every round, each key has at
// most one winner, a key free to take has exactly one, and nothing fails
// (an aborted deadlock is sent again).
func TestClaimManyOverlappingCallsRace(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	const keys, callers, rounds, perCall = 24, 6, 8, 12
	base := time.Now()
	for round := range rounds {
		now := base.Add(time.Duration(round) * time.Hour) // every earlier round's lease has lapsed
		ids := make([]string, keys)
		for i := range ids {
			ids[i] = "race#" + randomHex(8)
			if i%3 == 0 && round > 0 {
				ids[i] = "race-kept#" + strconv.Itoa(i) // stored by the round before, lapsed
			}
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners = map[string]int{}
			tried   = map[string]bool{}
		)
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				recs := make([]storage.Record, 0, perCall)
				for _, k := range rand.Perm(keys)[:perCall] {
					r := liveRecord(now)
					r.ID, r.Fingerprint = ids[k], "" // any lapsed owner may be taken over
					r.ExpiresAt = now.Add(24 * time.Hour)
					r.LeaseExpiresAt = now.Add(time.Minute)
					recs = append(recs, r)
				}
				var out []storage.ClaimOutcome
				if c == 0 { // one caller claims one by one
					for _, r := range recs {
						res, err := store.Claim(ctx, r, now)
						out = append(out, storage.ClaimOutcome{Result: res, Err: err})
					}
				} else {
					var err error
					out, err = store.ClaimMany(ctx, recs, now)
					assert.NoError(t, err)
				}
				mu.Lock()
				defer mu.Unlock()
				for i, o := range out {
					assert.NoError(t, o.Err)
					tried[recs[i].ID] = true
					if o.Result.Claimed {
						winners[recs[i].ID]++
					}
				}
			}()
		}
		wg.Wait()
		for id := range tried {
			assert.Equal(t, 1, winners[id], "round %d: %s: winners", round, id)
		}
	}
}

// BenchmarkClaimMany compares ClaimMany of 100 new records with 100
// sequential Claims, in the store's default mode and in pgx's (statements
// prepared once per connection): on loopback, and with 5 ms added to each
// round trip.
func BenchmarkClaimMany(b *testing.B) {
	for _, latency := range []time.Duration{0, 5 * time.Millisecond} {
		pool := newPool(b, func(cfg *pgxpool.Config) {
			dial := cfg.ConnConfig.DialFunc
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &slowConn{Conn: conn, latency: latency}, nil
			}
		})
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
			store := newTable(b, pool, func(o *pgstore.Options) { o.QueryExecMode = mode })
			now := time.Now()
			batch := func() []storage.Record {
				recs := make([]storage.Record, 100)
				for i := range recs {
					recs[i] = liveRecord(now)
				}
				return recs
			}
			name := "loopback/" + mode.String()
			if latency > 0 {
				name = latency.String() + "-per-round-trip/" + mode.String()
			}
			b.Run(name+"/ClaimMany-100", func(b *testing.B) {
				for b.Loop() {
					out, err := store.ClaimMany(b.Context(), batch(), now)
					if err != nil || !out[99].Result.Claimed {
						b.Fatal(err, out)
					}
				}
			})
			b.Run(name+"/Claim-100-sequential", func(b *testing.B) {
				for b.Loop() {
					for _, rec := range batch() {
						if res, err := store.Claim(b.Context(), rec, now); err != nil || !res.Claimed {
							b.Fatal(err, res)
						}
					}
				}
			})
		}
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
