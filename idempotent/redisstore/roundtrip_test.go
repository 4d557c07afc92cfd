package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// counter is a go-redis hook that records every command the client sends, and
// counts the writes to the network, each of which is one request (and one
// round trip: the client waits for the reply before its next command).
type counter struct {
	mu     sync.Mutex
	cmds   []string
	writes int
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, c: c}, nil
	}
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.cmds = append(c.cmds, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		c.cmds = append(c.cmds, "pipeline")
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the commands and network writes since the last take.
func (c *counter) take() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds, writes := c.cmds, c.writes
	c.cmds, c.writes = nil, 0
	return cmds, writes
}

type countingConn struct {
	net.Conn
	c *counter
}

func (cc *countingConn) Write(p []byte) (int, error) {
	cc.c.mu.Lock()
	cc.c.writes++
	cc.c.mu.Unlock()
	return cc.Conn.Write(p)
}

// TestRoundTrips measures the steady state (scripts cached by the server):
// every Store call is one EVALSHA, one round trip, whatever its outcome.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	hook := &counter{}
	// One connection, opened by the warm-up below, so connection set-up
	// (HELLO, CLIENT SETINFO) is not counted against the store.
	opts := redisOptions(t)
	opts.PoolSize = 1
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	client.AddHook(hook) // before the first dial, so the connection is counted
	prefix := testPrefix(t, client)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	ctx := ctxT(t)
	require.NoError(t, client.Ping(ctx).Err())
	require.NoError(t, store.LoadScripts(ctx))
	hook.take()

	now := time.Now()
	rec := liveRecord(now)
	rival := rec
	rival.Lease = randomHex(16)
	other := liveRecord(now)
	lapsed := other
	lapsed.Lease = randomHex(16)
	lapsed.LeaseExpiresAt = now.Add(time.Hour)
	stepped := liveRecord(now)
	resumed := stepped
	resumed.Lease = randomHex(16)
	step := storage.Step{Name: "charge", Data: []byte(`{"chargeId":"ch_1"}`)}
	// A store with a small limit, so that a step too large for the record
	// (which only the script can tell) still fits one network write. The
	// step is the largest the client's own check, which counts the key and
	// the step alone, lets through.
	const smallLimit = 1000
	small := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix, o.MaxItemBytes = prefix, smallLimit })
	big := storage.Step{Name: "big", Data: make([]byte, smallLimit-len(store.Key(stepped.ID))-len("steps")-len("3:big,NNN:,"))}
	steps := []struct {
		name string
		call func() error
	}{
		{"claim (new key)", func() error { _, err := store.Claim(ctx, rec, now); return err }},
		{"claim (retried, own lease)", func() error { _, err := store.Claim(ctx, rec, now); return err }},
		{"claim (refused, in progress)", func() error { _, err := store.Claim(ctx, rival, now); return err }},
		{"complete", func() error { return store.Complete(ctx, completedRecord(rec, []byte("p"), now)) }},
		{"complete (retried)", func() error { return store.Complete(ctx, completedRecord(rec, []byte("p"), now)) }},
		{"claim (refused, replay)", func() error { _, err := store.Claim(ctx, rival, now); return err }},
		{"complete (fenced)", func() error { return wantLeaseLost(store.Complete(ctx, completedRecord(rival, nil, now))) }},
		{"claim (second key)", func() error { _, err := store.Claim(ctx, other, now); return err }},
		{"claim (takeover)", func() error { _, err := store.Claim(ctx, lapsed, now.Add(2*time.Minute)); return err }},
		{"release (fenced)", func() error { return wantLeaseLost(store.Release(ctx, other.ID, other.Lease)) }},
		{"release", func() error { return store.Release(ctx, lapsed.ID, lapsed.Lease) }},
		{"release (already gone)", func() error { return store.Release(ctx, lapsed.ID, lapsed.Lease) }},
		{"claim (third key)", func() error { _, err := store.Claim(ctx, stepped, now); return err }},
		{"append step", func() error { return store.AppendStep(ctx, stepped.ID, stepped.Lease, step) }},
		{"append step (too large)", func() error {
			return wantErr(small.AppendStep(ctx, stepped.ID, stepped.Lease, big), storage.ErrTooLarge)
		}},
		{"claim (retried, own lease, steps)", func() error { return wantSteps(store.Claim(ctx, stepped, now)) }},
		{"suspend", func() error { return store.Suspend(ctx, stepped.ID, stepped.Lease, now.Add(-time.Millisecond)) }},
		{"claim (resuming takeover)", func() error { return wantSteps(store.Claim(ctx, resumed, now)) }},
		{"append step (fenced)", func() error { return wantLeaseLost(store.AppendStep(ctx, stepped.ID, stepped.Lease, step)) }},
		{"suspend (fenced)", func() error { return wantLeaseLost(store.Suspend(ctx, stepped.ID, stepped.Lease, now)) }},
		{"suspend (already gone)", func() error { return store.Suspend(ctx, other.ID, other.Lease, now) }},
	}
	for _, step := range steps {
		require.NoError(t, step.call(), step.name)
		cmds, writes := hook.take()
		assert.Equal(t, []string{"evalsha"}, cmds, "%s: commands sent", step.name)
		assert.Equal(t, 1, writes, "%s: requests written to the network", step.name)
		t.Logf("%-28s %d round trip(s): %v", step.name, writes, cmds)
	}
}

// wantLeaseLost turns the expected ErrLeaseLost into nil, and anything else into an error.
func wantLeaseLost(err error) error { return wantErr(err, storage.ErrLeaseLost) }

// wantErr turns an error wrapping want into nil, and anything else into an error.
func wantErr(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return fmt.Errorf("error %v, want one wrapping %v", err, want)
}

// wantSteps turns a claim that handed over steps into nil, and anything
// else into an error.
func wantSteps(res storage.ClaimResult, err error) error {
	if err != nil {
		return err
	}
	if !res.Claimed || len(res.Steps) == 0 {
		return fmt.Errorf("claim result %+v, want claimed with steps", res)
	}
	return nil
}
