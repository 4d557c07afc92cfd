package dynamostore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var _ storage.ClaimManyStore = (*Store)(nil)

// ClaimMany implements storage.ClaimManyStore with one Claim per record
// (DynamoDB has no conditional batch write, and a transaction of many
// claims would fail them all when one is refused), run concurrently, at
// most Options.ClaimManyConcurrency at a time: N records cost N conditional
// PutItems (and whatever more each Claim costs in its rare cases), in about
// N / ClaimManyConcurrency round trips of time. Each record's error is its
// own (ClaimOutcome.Err): throttling or a corrupt item fails only the
// records it concerns.
func (s *Store) ClaimMany(ctx context.Context, recs []storage.Record, now time.Time) ([]storage.ClaimOutcome, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynamostore: claim many: %w", err)
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return nil, fmt.Errorf("dynamostore: claim many: %w", err)
	}
	out := make([]storage.ClaimOutcome, len(recs))
	workers := min(s.opts.ClaimManyConcurrency, len(recs))
	next := make(chan int)
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for i := range next {
				out[i].Result, out[i].Err = s.Claim(ctx, recs[i], now)
			}
		}()
	}
	for i := range recs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, nil
}
