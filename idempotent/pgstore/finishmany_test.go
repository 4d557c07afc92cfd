package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// finishCall is CompleteMany or ReleaseMany.
type finishCall func(s *pgstore.Store, ctx context.Context, recs []storage.Record) ([]error, error)

var finishCalls = []struct {
	name string
	call finishCall
}{
	{"CompleteMany", (*pgstore.Store).CompleteMany},
	{"ReleaseMany", (*pgstore.Store).ReleaseMany},
}

// TestFinishManyRoundTrips: any number of records is one statement, one
// round trip, whatever each outcome; a record PostgreSQL's text cannot hold
// (and, for CompleteMany, one too large) fails alone, before the call, and
// is not sent; no records, or none left to send, no call.
func TestFinishManyRoundTrips(t *testing.T) {
	t.Parallel()
	for _, fc := range finishCalls {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			pool, writes := countingPool(t)
			store := newTable(t, pool)
			ctx := ctxT(t)
			now := time.Now()
			const n, lost = 100, 10
			recs := make([]storage.Record, n)
			for i := range recs {
				recs[i] = completedRecord(claimNew(t, store, now), []byte{0, 0xff, byte(i)}, now)
				if i < lost {
					recs[i].Lease = randomHex(16)
				}
			}
			invalid := n - 1
			recs[invalid].ID = "bad\xff#" + randomHex(32)
			tooLarge := n - 2
			if fc.name == "CompleteMany" {
				recs[tooLarge].Data = bytes.Repeat([]byte{'x'}, store.Options().MaxItemBytes)
			}

			before := writes.Load()
			errs, err := fc.call(store, ctx, recs)
			require.NoError(t, err)
			assert.Equal(t, int64(1), writes.Load()-before, "round trips")
			require.Len(t, errs, n)
			for i, err := range errs {
				switch {
				case i == invalid:
					require.ErrorIs(t, err, pgstore.ErrInvalidText, "the record of an invalid ID")
				case i == tooLarge && fc.name == "CompleteMany":
					require.ErrorIs(t, err, storage.ErrTooLarge, "the record too large")
				case i < lost:
					require.ErrorIs(t, err, storage.ErrLeaseLost, "record %d", i)
				default:
					require.NoError(t, err, "record %d", i)
				}
			}
			if fc.name == "CompleteMany" {
				got, err := store.Get(ctx, recs[lost].ID)
				require.NoError(t, err)
				assert.Equal(t, recs[lost].Data, got.Data, "a completed record")
				got, err = store.Get(ctx, recs[tooLarge].ID)
				require.NoError(t, err)
				assert.Equal(t, storage.StatusInProgress, got.Status, "the record too large is left as it was")
			}

			for name, recs := range map[string][]storage.Record{"no records": nil, "none to send": recs[invalid:]} {
				before := writes.Load()
				errs, err := fc.call(store, ctx, recs)
				require.NoError(t, err, name)
				require.Len(t, errs, len(recs), name)
				assert.Zero(t, writes.Load()-before, "%s: no call", name)
			}
		})
	}
}

// TestFinishManyOverlappingCallsRace runs rounds of concurrent
// CompleteMany, ReleaseMany and ClaimMany calls over random overlapping
// subsets of a few stored keys, each in its own order: no call fails (a
// deadlock would abort one), each record fails only as the single call
// may (another lease, or already completed), and no key is both completed
// and released by its owner.
func TestFinishManyOverlappingCallsRace(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	const keys, callers, rounds, perCall = 24, 9, 6, 12
	for round := range rounds {
		now := time.Now()
		owned := make([]storage.Record, keys)
		for i := range owned {
			owned[i] = claimNew(t, store, now)
		}
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			completed = map[string]bool{} // ids a CompleteMany completed
			released  = map[string]bool{} // ids a ReleaseMany found gone or deleted
		)
		start := make(chan struct{})
		for c := range callers {
			recs := make([]storage.Record, 0, perCall)
			for _, k := range rand.Perm(keys)[:perCall] {
				recs = append(recs, owned[k])
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var (
					errs []error
					err  error
				)
				switch c % 3 {
				case 0:
					for i := range recs {
						recs[i] = completedRecord(recs[i], []byte("p"), now)
					}
					errs, err = store.CompleteMany(ctx, recs)
				case 1:
					errs, err = store.ReleaseMany(ctx, recs)
				default:
					for i := range recs {
						recs[i].Lease = randomHex(16) // a rival's claim: claims a released key
					}
					var out []storage.ClaimOutcome
					out, err = store.ClaimMany(ctx, recs, now)
					for _, o := range out {
						errs = append(errs, o.Err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if !assert.NoError(t, err, "round %d, caller %d", round, c) {
					return
				}
				for i, e := range errs {
					switch {
					case e == nil && c%3 == 0:
						completed[recs[i].ID] = true
					case e == nil && c%3 == 1:
						released[recs[i].ID] = true
					case e != nil && !errors.Is(e, storage.ErrLeaseLost) && !errors.Is(e, storage.ErrAlreadyCompleted):
						t.Errorf("round %d, caller %d, record %s: %v", round, c, recs[i].ID, e)
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for id := range completed {
			assert.False(t, released[id], "round %d: %s: its owner both completed and released it", round, id)
		}
	}
}

// TestFinishManyBehindAPooler runs CompleteMany and ReleaseMany twice
// through the pooler, as TestEveryStatementBehindAPooler runs the others:
// the second time on another server connection than the first, which a
// statement prepared by name the first time would not find there.
func TestFinishManyBehindAPooler(t *testing.T) {
	t.Parallel()
	pooled := poolerURL(t)
	db := ownDatabase(t)
	setup := newTable(t, newPool(t, inDatabase(db)))
	table := setup.Options().Table
	now := time.Now()
	ctx := ctxT(t)
	tests := []struct {
		name string
		op   func(t *testing.T, s *pgstore.Store) error
	}{
		{"complete many, with binary responses (bytea[])", func(t *testing.T, s *pgstore.Store) error {
			a, b := claimNew(t, setup, now), claimNew(t, setup, now)
			errs, err := s.CompleteMany(ctx, []storage.Record{completedRecord(a, binary(), now), completedRecord(b, nil, now)})
			if err != nil {
				return err
			}
			require.Equal(t, []error{nil, nil}, errs)
			got, err := setup.Get(ctx, a.ID)
			require.NoError(t, err)
			assert.Equal(t, binary(), got.Data)
			return nil
		}},
		{"release many", func(t *testing.T, s *pgstore.Store) error {
			a, b := claimNew(t, setup, now), claimNew(t, setup, now)
			b.Lease = randomHex(16)
			errs, err := s.ReleaseMany(ctx, []storage.Record{a, b})
			if err != nil {
				return err
			}
			require.Len(t, errs, 2)
			require.NoError(t, errs[0])
			require.ErrorIs(t, errs[1], storage.ErrLeaseLost)
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newPoolAt(t, pooled, inDatabase(db))
			other := newPoolAt(t, pooled, inDatabase(db))
			s := pgstore.New(client, func(o *pgstore.Options) { o.Table = table })
			require.NoError(t, tc.op(t, s), "the first time")
			holdServerConn(t, other)
			require.NoError(t, tc.op(t, s), "again, on another server connection")
		})
	}
}

// TestFinishManyDecidesOnWhatALockHolderCommitted: a record whose row
// another transaction holds (a takeover, or the owner's own completion,
// committing) makes the many call wait, then decide on what that
// transaction committed, exactly as the single call decides; the record
// beside it in the call is decided as if it were not there.
func TestFinishManyDecidesOnWhatALockHolderCommitted(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	table := `"` + store.Options().Table + `"`
	tests := []struct {
		name    string
		release bool   // ReleaseMany and Release, else CompleteMany and Complete
		holder  string // the holder's statement: $1 the id, $2 (if used) a new lease
		want    error  // the held record's error
		status  storage.Status
		lease   bool // the held record keeps the caller's lease
	}{
		{"release: the owner's completion commits", true, `UPDATE ` + table + ` SET status = 'COMPLETED' WHERE id = $1`,
			storage.ErrAlreadyCompleted, storage.StatusCompleted, true},
		{"release: a takeover commits", true, `UPDATE ` + table + ` SET lease = $2 WHERE id = $1`,
			storage.ErrLeaseLost, storage.StatusInProgress, false},
		{"complete: a takeover commits", false, `UPDATE ` + table + ` SET lease = $2 WHERE id = $1`,
			storage.ErrLeaseLost, storage.StatusInProgress, false},
		{"complete: a change beside the fence commits", false,
			`UPDATE ` + table + ` SET lease_expires_at = lease_expires_at + interval '1 second' WHERE id = $1`,
			nil, storage.StatusCompleted, true},
	}
	for _, tt := range tests {
		for _, many := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: " (many)", false: " (single)"}[many], func(t *testing.T) {
				now := time.Now()
				held, free := claimNew(t, store, now), claimNew(t, store, now)
				holder, err := pool.Begin(ctxT(t))
				require.NoError(t, err)
				t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
				args := []any{held.ID}
				if strings.Contains(tt.holder, "$2") {
					args = append(args, randomHex(16))
				}
				_, err = holder.Exec(ctxT(t), tt.holder, args...)
				require.NoError(t, err)

				recs := []storage.Record{completedRecord(held, []byte("p"), now), completedRecord(free, []byte("p"), now)}
				type answer struct {
					errs []error
					err  error
				}
				done := make(chan answer, 1)
				go func() {
					var a answer
					switch {
					case many && tt.release:
						a.errs, a.err = store.ReleaseMany(ctxT(t), recs)
					case many:
						a.errs, a.err = store.CompleteMany(ctxT(t), recs)
					case tt.release:
						a.errs = []error{store.Release(ctxT(t), held.ID, held.Lease)}
					default:
						a.errs = []error{store.Complete(ctxT(t), recs[0])}
					}
					done <- a
				}()
				waitForLockWait(t, pool, store.Options().Table)
				require.NoError(t, holder.Commit(ctxT(t)))
				a := <-done
				require.NoError(t, a.err)
				if tt.want == nil {
					require.NoError(t, a.errs[0])
				} else {
					require.ErrorIs(t, a.errs[0], tt.want)
				}
				if many {
					require.Len(t, a.errs, 2)
					require.NoError(t, a.errs[1], "the record beside it")
				}
				got, err := store.Get(ctxT(t), held.ID)
				require.NoError(t, err, "the held record is kept")
				assert.Equal(t, tt.status, got.Status)
				assert.Equal(t, tt.lease, got.Lease == held.Lease, "the caller's lease")
			})
		}
	}
}
