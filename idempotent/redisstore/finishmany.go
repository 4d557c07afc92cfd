package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var _ storage.FinishManyStore = (*Store)(nil)

// CompleteMany implements storage.FinishManyStore with the complete script
// of Complete, once per record, all in one pipeline: one round trip for any
// number of records, split by go-redis into one pipeline per primary on a
// cluster (one per shard on a Ring), as ClaimMany's. Each script runs
// atomically on its own key, so every record is decided exactly as
// Complete decides it; nothing is atomic across records. A record larger
// than Options.MaxItemBytes fails alone with an error wrapping
// storage.ErrTooLarge, before the pipeline, and is not sent.
//
// Scripts the server answers NOSCRIPT go again as EVAL in a second
// pipeline, as ClaimMany's. Each record's error is its own. A client that
// cannot pipeline completes the records one after another.
func (s *Store) CompleteMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := checkMany(ctx, "complete many", recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	errs := make([]error, len(recs))
	p, ok := s.client.(pipeliner)
	if !ok {
		for i := range recs {
			errs[i] = s.Complete(ctx, recs[i])
		}
		return errs, nil
	}
	calls := make([]scriptCall, 0, len(recs))
	for i := range recs {
		key := s.Key(recs[i].ID)
		if size := completedSize(key, &recs[i]); size > s.opts.MaxItemBytes {
			errs[i] = fmt.Errorf("redisstore: complete: %w: the record would be %d bytes (limit %d)", storage.ErrTooLarge, size, s.opts.MaxItemBytes)
			continue
		}
		calls = append(calls, scriptCall{i: i, keys: []string{key}, args: completeArgs(&recs[i])})
	}
	runPipelined(ctx, p, completeScript, calls)
	for _, c := range calls {
		reply, err := c.cmd.Slice()
		if err != nil {
			errs[c.i] = fmt.Errorf("redisstore: complete: %w", err)
			continue
		}
		errs[c.i] = completeReply(&recs[c.i], c.keys[0], reply)
	}
	return errs, nil
}

// ReleaseMany implements storage.FinishManyStore with the release script of
// Release, once per record, in one pipeline, as CompleteMany sends its
// completions: every record is decided exactly as Release decides it (a
// record already gone is no error). A client that cannot pipeline releases
// the records one after another.
func (s *Store) ReleaseMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	if err := checkMany(ctx, "release many", recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	errs := make([]error, len(recs))
	p, ok := s.client.(pipeliner)
	if !ok {
		for i := range recs {
			errs[i] = s.Release(ctx, recs[i].ID, recs[i].Lease)
		}
		return errs, nil
	}
	calls := make([]scriptCall, len(recs))
	for i := range recs {
		calls[i] = scriptCall{i: i, keys: []string{s.Key(recs[i].ID)}, args: []any{recs[i].Lease}}
	}
	runPipelined(ctx, p, releaseScript, calls)
	for _, c := range calls {
		reply, err := c.cmd.Slice()
		if err != nil {
			errs[c.i] = fmt.Errorf("redisstore: release: %w", err)
			continue
		}
		errs[c.i] = releaseReply(c.keys[0], reply)
	}
	return errs, nil
}

// checkMany is what a many call checks before it sends anything: an ended
// ctx and duplicate IDs fail it whole.
func checkMany(ctx context.Context, op string, recs []storage.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return nil
}

// scriptCall is one run of a script in a pipeline: recs[i]'s, on keys with
// args; cmd holds its answer once runPipelined returns.
type scriptCall struct {
	i    int
	keys []string
	args []any
	cmd  *redis.Cmd
}

// runPipelined runs script once per call, as EVALSHA in one pipeline, and
// those the server answers NOSCRIPT again as EVAL in a second one. Each
// call's cmd carries its own answer or error. No calls, no pipeline.
func runPipelined(ctx context.Context, p pipeliner, script *redis.Script, calls []scriptCall) {
	if len(calls) == 0 {
		return
	}
	pipe := p.Pipeline()
	for j := range calls {
		calls[j].cmd = script.EvalSha(ctx, pipe, calls[j].keys, calls[j].args...)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own error
	var again []int
	for j := range calls {
		if redis.HasErrorPrefix(calls[j].cmd.Err(), "NOSCRIPT") {
			again = append(again, j)
		}
	}
	if len(again) == 0 {
		return
	}
	pipe = p.Pipeline()
	for _, j := range again {
		calls[j].cmd = script.Eval(ctx, pipe, calls[j].keys, calls[j].args...)
	}
	_, _ = pipe.Exec(ctx)
}
