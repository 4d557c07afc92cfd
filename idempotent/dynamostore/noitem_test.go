package dynamostore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// Some DynamoDB-compatible servers ignore ReturnValuesOnConditionCheckFailure:
// a failed condition comes back without the item. These tests make DynamoDB
// Local behave so, and hold the store to the same outcomes.

// dropConditionItem is an SDK middleware that removes the item from every
// ConditionalCheckFailedException, as such a server would send it. It sits
// at the front of the Deserialize step, so it sees the error the operation's
// deserializer made of each attempt's response.
func dropConditionItem(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("idemkitDropConditionItem",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				ccf.Item = nil
			}
			return out, md, err
		}), middleware.Before)
}

// TestConformanceWithoutConditionItems runs the conformance suite against a
// DynamoDB that returns no item with a failed condition.
func TestConformanceWithoutConditionItems(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t, withMiddleware(dropConditionItem))
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newLocalStore(t, client, l)
			storetest.Run(t, store)
		})
	}
}

// TestLocalFencedWritesWithoutConditionItems runs each fenced write's
// failure against DynamoDB Local as it is and against the same table
// through a client that drops the item from failed conditions: the outcome
// is the same, and the fallback read is the only call more (none is made
// when the item comes with the failure, except when there is no item).
func TestLocalFencedWritesWithoutConditionItems(t *testing.T) {
	t.Parallel()
	counter := &callCounter{}
	client := localddbtest.Client(t, withMiddleware(counter.apiOption))
	dropped := &callCounter{}
	droppingClient := localddbtest.Client(t, withMiddleware(dropped.apiOption, dropConditionItem))
	table := createTable(t, client, false)
	stores := []struct {
		name    string
		store   *dynamostore.Store
		counter *callCounter
	}{
		{"item returned", dynamostore.New(client, table), counter},
		{"no item returned", dynamostore.New(droppingClient, table), dropped},
	}
	setup := dynamostore.New(client, table)
	now := time.Now()
	// claimed is a fresh INPROGRESS record; completed, one its owner completed.
	claimed := func(t *testing.T) storage.Record {
		rec := liveRecord(now)
		res, err := setup.Claim(t.Context(), rec, now)
		require.NoError(t, err)
		require.True(t, res.Claimed)
		return rec
	}
	completed := func(t *testing.T) storage.Record {
		rec := claimed(t)
		done := rec
		done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p{}")
		require.NoError(t, setup.Complete(t.Context(), done))
		return done
	}
	const lost = "idempotent: lease lost to another invocation"
	tests := []struct {
		name string
		// run prepares the record (through setup) and returns the write
		// under test, and the message its outcome must have ("": none).
		run        func(t *testing.T) (func(*dynamostore.Store) error, string)
		wantCalls  []string // item returned; without, a GetItem follows
		readAnyway bool     // no item exists: both read
	}{
		{"complete under another lease", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := claimed(t)
			done := rec
			done.Lease, done.Status, done.LeaseExpiresAt, done.Data = "lease-late", storage.StatusCompleted, time.Time{}, []byte("p{}")
			return func(s *dynamostore.Store) error { return s.Complete(t.Context(), done) },
				"dynamostore: complete: " + lost + " (the record is INPROGRESS under another lease)"
		}, []string{"UpdateItem"}, false},
		{"append step under another lease", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := claimed(t)
			return func(s *dynamostore.Store) error {
					return s.AppendStep(t.Context(), rec.ID, "lease-late", storage.Step{Name: "charge"})
				},
				`dynamostore: append step "charge": ` + lost + " (the record is INPROGRESS under another lease)"
		}, []string{"UpdateItem"}, false},
		{"append step to a completed record", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := completed(t)
			return func(s *dynamostore.Store) error {
					return s.AppendStep(t.Context(), rec.ID, rec.Lease, storage.Step{Name: "charge"})
				},
				`dynamostore: append step "charge": ` + lost + " (the record is COMPLETED)"
		}, []string{"UpdateItem"}, false},
		{"suspend under another lease", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := claimed(t)
			return func(s *dynamostore.Store) error { return s.Suspend(t.Context(), rec.ID, "lease-late", now) },
				"dynamostore: suspend: " + lost + " (the record is INPROGRESS under another lease)"
		}, []string{"UpdateItem"}, false},
		{"suspend a completed record", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := completed(t)
			return func(s *dynamostore.Store) error { return s.Suspend(t.Context(), rec.ID, rec.Lease, now) },
				"dynamostore: suspend: " + storage.ErrAlreadyCompleted.Error()
		}, []string{"UpdateItem"}, false},
		{"suspend a record that is gone", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := liveRecord(now)
			return func(s *dynamostore.Store) error { return s.Suspend(t.Context(), rec.ID, rec.Lease, now) }, ""
		}, []string{"UpdateItem"}, true},
		{"release under another lease", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := claimed(t)
			return func(s *dynamostore.Store) error { return s.Release(t.Context(), rec.ID, "lease-late") },
				"dynamostore: release: " + lost + " (the record is INPROGRESS under another lease)"
		}, []string{"DeleteItem"}, false},
		{"delete a record that changed", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := claimed(t)
			read, err := setup.Get(t.Context(), rec.ID)
			require.NoError(t, err)
			require.NoError(t, setup.Suspend(t.Context(), rec.ID, rec.Lease, now))
			return func(s *dynamostore.Store) error { return s.Delete(t.Context(), read) },
				"dynamostore: delete " + rec.ID + ": idempotent: record changed since it was read"
		}, []string{"DeleteItem"}, false},
		{"delete a record that is gone", func(t *testing.T) (func(*dynamostore.Store) error, string) {
			rec := claimed(t)
			read, err := setup.Get(t.Context(), rec.ID)
			require.NoError(t, err)
			require.NoError(t, setup.Release(t.Context(), rec.ID, rec.Lease))
			return func(s *dynamostore.Store) error { return s.Delete(t.Context(), read) },
				"dynamostore: delete " + rec.ID + ": idempotent: record changed since it was read: idempotent: no record with this id"
		}, []string{"DeleteItem"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the cases share the call counters.
			for _, st := range stores {
				write, want := tt.run(t)
				st.counter.take()
				err := write(st.store)
				if want == "" {
					require.NoError(t, err, st.name)
				} else {
					require.EqualError(t, err, want, st.name)
				}
				wantCalls := tt.wantCalls
				if tt.readAnyway || st.counter == dropped {
					wantCalls = append(slices.Clone(wantCalls), "GetItem")
				}
				assert.Equal(t, wantCalls, st.counter.take(), st.name)
			}
		})
	}
}

// TestLocalResumeWithoutConditionItems: a suspended record is resumed, not
// taken over, through a server that drops the item from failed conditions
// too (a successful claim's ALL_OLD is not affected), and a record suspended
// through it is refused by another owner's Suspend.
func TestLocalResumeWithoutConditionItems(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t, withMiddleware(dropConditionItem))
	store, _ := newLocalStore(t, client, layouts[0])
	now := time.Now()
	rec := liveRecord(now)
	_, err := store.Claim(t.Context(), rec, now)
	require.NoError(t, err)
	step := storage.Step{Name: "charge", Data: []byte("1")}
	require.NoError(t, store.AppendStep(t.Context(), rec.ID, rec.Lease, step))
	require.ErrorIs(t, store.Suspend(t.Context(), rec.ID, "lease-late", now), storage.ErrLeaseLost)
	require.NoError(t, store.Suspend(t.Context(), rec.ID, rec.Lease, now.Add(-time.Millisecond)))

	got, err := store.Get(t.Context(), rec.ID)
	require.NoError(t, err)
	assert.True(t, got.Suspended)

	res, err := store.Claim(t.Context(), rival(rec, now), now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, Resumed: true, Steps: []storage.Step{step}}, res)
	got, err = store.Get(t.Context(), rec.ID)
	require.NoError(t, err)
	assert.False(t, got.Suspended)
}
