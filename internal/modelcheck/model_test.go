package modelcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestModel runs the state machine (machine_test.go) over each store, with
// rapid's number of checks (-rapid.checks, default 100) per store. Each check
// gets its own key prefix, so the servers' stores are shared between checks.
func TestModel(t *testing.T) {
	for _, s := range []struct {
		name string
		open func(t *testing.T) func() (storage.StepStore, storetest.TxWrites)
	}{
		{"memory", func(*testing.T) func() (storage.StepStore, storetest.TxWrites) {
			return func() (storage.StepStore, storetest.TxWrites) { return idempotent.NewMemoryStore(), nil }
		}},
		{"memory+tx", func(*testing.T) func() (storage.StepStore, storetest.TxWrites) {
			return func() (storage.StepStore, storetest.TxWrites) { s := newMemTxStore(); return s, s }
		}},
		{"dynamodb", openDynamo},
		{"redis", openRedis},
		{"postgres", openPostgres},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.open(t)
			var checks atomic.Int64
			var st stats
			start := time.Now()
			rapid.Check(t, func(rt *rapid.T) {
				inner, writes := store()
				m := newMachine(rt, inner, writes, fmt.Sprintf("mc%d", checks.Add(1)), &st)
				rt.Repeat(rapid.StateMachineActions(m))
			})
			t.Logf("%d runs (checks and shrinking) on the %s store in %v; %v", checks.Load(), s.name, time.Since(start).Round(time.Millisecond), &st)
		})
	}
}

// stats counts, over the runs on one store, how calls for one key met: in
// one process (a wrapper's flight) and across processes (the store). The
// log shows them, so a change that stops exercising either is seen.
type stats struct {
	flightInProgress, flightMismatch atomic.Int64 // answered by their wrapper's flight, no store call
	shared                           atomic.Int64 // shared the replay of the claim they waited on
	pastLapsed                       atomic.Int64 // went to the store past their flight's lapsed leader
	races, waited                    atomic.Int64 // Race steps; duplicates seen waiting on a claim in flight
	storeContended                   atomic.Int64 // refused by the store for another wrapper's INPROGRESS record
	crossTakeovers                   atomic.Int64 // took over another wrapper's record
	resumed, suspended               atomic.Int64 // claims that kept a finished step; failed runs that kept theirs
	txCommitted, txLeaseLost         atomic.Int64 // tx commits that landed; refused for a lost lease
	txAborted, txUnknown             atomic.Int64 // refused for a failing write; faulted or dropped (crash)
}

func (s *stats) String() string {
	return fmt.Sprintf("answered by their wrapper's flight: %d ErrInProgress, %d ErrPayloadMismatch, %d shared replays; "+
		"%d went to the store past a lapsed leader; %d races (%d seen waiting on a claim in flight); "+
		"store refusals for another wrapper's INPROGRESS record: %d; takeovers across wrappers: %d; "+
		"claims that resumed a finished step: %d; failed runs that suspended their record: %d; "+
		"transactions: %d committed, %d lost their lease, %d aborted by a failing write, %d faulted or dropped",
		s.flightInProgress.Load(), s.flightMismatch.Load(), s.shared.Load(), s.pastLapsed.Load(),
		s.races.Load(), s.waited.Load(), s.storeContended.Load(), s.crossTakeovers.Load(),
		s.resumed.Load(), s.suspended.Load(), s.txCommitted.Load(), s.txLeaseLost.Load(), s.txAborted.Load(), s.txUnknown.Load())
}

// openDynamo returns a store on a fresh table of DynamoDB Local, with the
// writes of its transactions in a second table, or skips (or, under
// scripts/with-dynamodb.sh, fails) without one.
func openDynamo(t *testing.T) func() (storage.StepStore, storetest.TxWrites) {
	client := localddbtest.Client(t)
	names := localddb.UniqueTables(t.Name())
	table := localddb.Table{Name: names.Idempotency, PartitionKey: "id", TTLAttribute: "expiration"}
	writesTable := localddb.Table{Name: names.Payments, PartitionKey: "pk"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tb := range []localddb.Table{table, writesTable} {
		require.NoError(t, localddb.CreateTable(ctx, client, tb))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := localddb.DeleteTable(ctx, client, tb.Name); err != nil {
				t.Error(err)
			}
		})
	}
	store := dynamostore.New(client, table.Name)
	writes := dynamoWrites{client: client, table: writesTable.Name}
	return func() (storage.StepStore, storetest.TxWrites) { return store, writes }
}

// openRedis returns a store on its own key prefix of the server at
// REDIS_URL, or skips without one unless IDEMKIT_REQUIRE_REDIS=1 (set by
// scripts/with-redis.sh) says it must be there.
func openRedis(t *testing.T) func() (storage.StepStore, storetest.TxWrites) {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_REDIS") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_REDIS=1 but REDIS_URL is not set (run under scripts/with-redis.sh)")
		}
		t.Skip("REDIS_URL is not set (run under scripts/with-redis.sh)")
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err, "REDIS_URL")
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, client.Ping(ctx).Err(), "Redis at REDIS_URL does not answer")

	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "idemkit-modelcheck:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			if err := client.Del(ctx, keys...).Err(); err != nil {
				t.Error(err)
			}
		}
	})
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	return func() (storage.StepStore, storetest.TxWrites) { return store, nil }
}
