package dynamostore

import (
	"context"
	"fmt"
	"sync"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var _ storage.FinishManyStore = (*Store)(nil)

// CompleteMany implements storage.FinishManyStore with one Complete per
// record (DynamoDB has no conditional batch write), run concurrently, at
// most Options.ClaimManyConcurrency at a time: N records cost N conditional
// UpdateItems, in about N / ClaimManyConcurrency round trips of time. Each
// record's error is its own Complete's.
func (s *Store) CompleteMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	return s.finishMany(ctx, "complete many", recs, func(rec *storage.Record) error {
		return s.Complete(ctx, *rec)
	})
}

// ReleaseMany implements storage.FinishManyStore with one Release per
// record, run as CompleteMany runs its Completes: N records cost N
// conditional DeleteItems (and the read a Release makes in its rare case).
// Each record's error is its own Release's.
func (s *Store) ReleaseMany(ctx context.Context, recs []storage.Record) ([]error, error) {
	return s.finishMany(ctx, "release many", recs, func(rec *storage.Record) error {
		return s.Release(ctx, rec.ID, rec.Lease)
	})
}

// finishMany runs op on each of recs, at most Options.ClaimManyConcurrency
// at once, after the checks every many call makes first.
func (s *Store) finishMany(ctx context.Context, name string, recs []storage.Record, op func(*storage.Record) error) ([]error, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynamostore: %s: %w", name, err)
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return nil, fmt.Errorf("dynamostore: %s: %w", name, err)
	}
	errs := make([]error, len(recs))
	workers := min(s.opts.ClaimManyConcurrency, len(recs))
	next := make(chan int)
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = op(&recs[i])
			}
		}()
	}
	for i := range recs {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs, nil
}
