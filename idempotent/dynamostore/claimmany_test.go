package dynamostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// inFlight is an SDK middleware that holds each request attempt for hold
// and records the most attempts in flight at once.
type inFlight struct {
	hold time.Duration
	mu   sync.Mutex
	now  int
	max  int
}

func (f *inFlight) apiOption(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("idemkitInFlight",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			f.mu.Lock()
			f.now++
			f.max = max(f.max, f.now)
			f.mu.Unlock()
			defer func() {
				f.mu.Lock()
				f.now--
				f.mu.Unlock()
			}()
			time.Sleep(f.hold)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

func (f *inFlight) peak() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}

// TestClaimManyCalls: N records are N conditional PutItems, at most
// Options.ClaimManyConcurrency in flight, whatever each outcome; a refused
// claim costs no read (the item comes with the failure).
func TestClaimManyCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		bound int // Options.ClaimManyConcurrency; 0 for the default
		want  int // the bound in effect
	}{
		{"default bound", 0, dynamostore.DefaultClaimManyConcurrency},
		{"bound of 4", 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			counter, flight := &callCounter{}, &inFlight{hold: 20 * time.Millisecond}
			client := localddbtest.Client(t, withMiddleware(counter.apiOption, flight.apiOption))
			table := createTable(t, client, false)
			store := dynamostore.New(client, table, func(o *dynamostore.Options) { o.ClaimManyConcurrency = tt.bound })
			require.Equal(t, tt.want, store.Options().ClaimManyConcurrency)
			now := time.Now()
			recs := make([]storage.Record, 100)
			for i := range recs {
				recs[i] = liveRecord(now)
			}
			held := recs[:10] // claimed before: the call's refusals
			for i := range held {
				_, err := store.Claim(t.Context(), held[i], now)
				require.NoError(t, err)
				held[i].Lease = randomID()[6:]
			}
			counter.take()

			out, err := store.ClaimMany(t.Context(), recs, now)
			require.NoError(t, err)
			require.Len(t, out, len(recs))
			for i, o := range out {
				require.NoError(t, o.Err, "record %d", i)
				assert.Equal(t, i >= len(held), o.Result.Claimed, "record %d claimed", i)
			}
			calls := counter.take()
			assert.Len(t, calls, len(recs), "one call per record")
			for _, c := range calls {
				assert.Equal(t, "PutItem", c)
			}
			assert.LessOrEqual(t, flight.peak(), tt.want, "PutItems in flight at once")
			assert.Greater(t, flight.peak(), 1, "the claims run concurrently")
			t.Logf("%d records: %d calls, at most %d in flight (bound %d)", len(recs), len(calls), flight.peak(), tt.want)

			out, err = store.ClaimMany(t.Context(), nil, now)
			require.NoError(t, err)
			assert.Empty(t, out)
			assert.Empty(t, counter.take(), "no records, no call")
		})
	}
}

// BenchmarkClaimMany compares ClaimMany of 100 new records with 100
// sequential Claims against DynamoDB Local: on loopback, where a call's
// time is DynamoDB Local's own work, and with 5 ms added to each call
// (about a round trip from Lambda).
func BenchmarkClaimMany(b *testing.B) {
	for _, tc := range []struct {
		name    string
		latency time.Duration
	}{{"loopback", 0}, {"5ms-per-call", 5 * time.Millisecond}} {
		client := localddbtest.Client(b, withMiddleware((&inFlight{hold: tc.latency}).apiOption))
		store := dynamostore.New(client, createTable(b, client, false))
		warm := benchRecord(time.Now(), -1)
		if _, err := store.Claim(b.Context(), warm, time.Now()); err != nil {
			b.Fatal(err)
		}
		batch := func(now time.Time, n int) []storage.Record {
			recs := make([]storage.Record, 100)
			for i := range recs {
				recs[i] = benchRecord(now, n*100+i)
			}
			return recs
		}
		b.Run(tc.name+"/ClaimMany-100", func(b *testing.B) {
			now := time.Now()
			for n := 0; b.Loop(); n++ {
				out, err := store.ClaimMany(b.Context(), batch(now, n), now)
				if err != nil || !out[99].Result.Claimed {
					b.Fatal(err, out[99])
				}
			}
		})
		b.Run(tc.name+"/Claim-100-sequential", func(b *testing.B) {
			now := time.Now().Add(time.Second) // other IDs than ClaimMany's
			for n := 0; b.Loop(); n++ {
				for _, rec := range batch(now, n) {
					if res, err := store.Claim(b.Context(), rec, now); err != nil || !res.Claimed {
						b.Fatal(err, res)
					}
				}
			}
		})
	}
}
