package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestFinishManyCalls: N records are N conditional UpdateItems
// (CompleteMany) or DeleteItems (ReleaseMany), at most
// Options.ClaimManyConcurrency in flight, whatever each outcome; a record
// of another lease costs no read (the item comes with the failure) and
// fails alone with storage.ErrLeaseLost.
func TestFinishManyCalls(t *testing.T) {
	t.Parallel()
	type finish func(s *dynamostore.Store, ctx context.Context, recs []storage.Record) ([]error, error)
	ops := []struct {
		name string
		call finish
		op   string // the DynamoDB operation of each record
	}{
		{"CompleteMany", (*dynamostore.Store).CompleteMany, "UpdateItem"},
		{"ReleaseMany", (*dynamostore.Store).ReleaseMany, "DeleteItem"},
	}
	bounds := []struct {
		name  string
		bound int // Options.ClaimManyConcurrency; 0 for the default
		want  int // the bound in effect
	}{
		{"default bound", 0, dynamostore.DefaultClaimManyConcurrency},
		{"bound of 4", 4, 4},
	}
	for _, op := range ops {
		for _, tt := range bounds {
			t.Run(op.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				counter, flight := &callCounter{}, &inFlight{hold: 20 * time.Millisecond}
				client := localddbtest.Client(t, withMiddleware(counter.apiOption, flight.apiOption))
				table := createTable(t, client, false)
				store := dynamostore.New(client, table, func(o *dynamostore.Options) { o.ClaimManyConcurrency = tt.bound })
				setup := dynamostore.New(localddbtest.Client(t), table) // its calls are not counted
				now := time.Now()
				const n, lost = 100, 10
				recs := make([]storage.Record, n)
				for i := range recs {
					recs[i] = liveRecord(now)
				}
				out, err := setup.ClaimMany(t.Context(), recs, now)
				require.NoError(t, err)
				for i := range recs {
					require.True(t, out[i].Result.Claimed, "record %d", i)
					recs[i].Status, recs[i].Data, recs[i].LeaseExpiresAt = storage.StatusCompleted, []byte("p"), time.Time{}
					if i < lost {
						recs[i].Lease = randomID()[6:] // another lease than the stored record's
					}
				}
				counter.take() // the table's creation

				errs, err := op.call(store, t.Context(), recs)
				require.NoError(t, err)
				require.Len(t, errs, n)
				for i, err := range errs {
					if i < lost {
						require.ErrorIs(t, err, storage.ErrLeaseLost, "record %d", i)
					} else {
						require.NoError(t, err, "record %d", i)
					}
				}
				calls := counter.take()
				assert.Len(t, calls, n, "one call per record")
				for _, c := range calls {
					assert.Equal(t, op.op, c)
				}
				assert.LessOrEqual(t, flight.peak(), tt.want, "calls in flight at once")
				assert.Greater(t, flight.peak(), 1, "the calls run concurrently")
				t.Logf("%s of %d records: %d calls, at most %d in flight (bound %d)", op.name, n, len(calls), flight.peak(), tt.want)

				errs, err = op.call(store, t.Context(), nil)
				require.NoError(t, err)
				assert.Empty(t, errs)
				assert.Empty(t, counter.take(), "no records, no call")
			})
		}
	}
}
