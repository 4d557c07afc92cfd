package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var _ storage.ClaimManyStore = (*Store)(nil)

// pipeliner is a client that sends many commands in one round trip: every
// go-redis client (*redis.Client, *redis.ClusterClient, *redis.Ring).
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// ClaimMany implements storage.ClaimManyStore with the claim script of
// Claim, once per record, all in one pipeline: one round trip for any
// number of records. Each script runs atomically on its own key, as
// Claim's, so every record is decided exactly as Claim decides it; nothing
// is atomic across records. A cluster client splits the pipeline by slot,
// into one pipeline per primary, sent concurrently (go-redis does it; it
// follows MOVED and ASK redirections too), so the round trip is one per
// node, in parallel; a Ring, one per shard.
//
// A server without the script cached (after a restart or a failover, or
// before LoadScripts) answers NOSCRIPT without running it: those claims go
// again as EVAL in a second pipeline, the one round trip more a Claim pays
// then. Each record's error is its own (ClaimOutcome.Err). A client that
// cannot pipeline (a redis.Scripter of your own) claims the records one
// after another.
func (s *Store) ClaimMany(ctx context.Context, recs []storage.Record, now time.Time) ([]storage.ClaimOutcome, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: claim many: %w", err)
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return nil, fmt.Errorf("redisstore: claim many: %w", err)
	}
	out := make([]storage.ClaimOutcome, len(recs))
	p, ok := s.client.(pipeliner)
	if !ok {
		for i := range recs {
			out[i].Result, out[i].Err = s.Claim(ctx, recs[i], now)
		}
		return out, nil
	}
	keys := make([]string, len(recs))
	args := make([][]any, len(recs))
	cmds := make([]*redis.Cmd, len(recs))
	pipe := p.Pipeline()
	for i := range recs {
		keys[i], args[i] = s.Key(recs[i].ID), claimArgs(&recs[i], now)
		cmds[i] = claimScript.EvalSha(ctx, pipe, keys[i:i+1:i+1], args[i]...)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own error
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := p.Pipeline()
		for _, i := range again {
			cmds[i] = claimScript.Eval(ctx, pipe, keys[i:i+1:i+1], args[i]...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, cmd := range cmds {
		reply, err := cmd.Slice()
		if err != nil {
			out[i].Err = fmt.Errorf("redisstore: claim: %w", err)
			continue
		}
		out[i].Result, out[i].Err = claimResult(&recs[i], keys[i], reply)
	}
	return out, nil
}
