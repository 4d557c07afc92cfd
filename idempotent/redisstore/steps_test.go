package redisstore_test

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// TestStepsLayout pins how steps are stored: one "steps" field holding the
// steps' netstrings in order, written by AppendStep, carried over by a
// resuming claim, kept by Suspend, removed by Complete; a "suspended" field
// "1" set by Suspend and gone after the resuming claim; and the key's
// expiry following the record's expiry throughout.
func TestStepsLayout(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	key := store.Key(rec.ID)

	charge := storage.Step{Name: "charge", Data: []byte("ch\x00,:1")}
	ledger := storage.Step{Name: "ledger", Data: []byte(`{"entry":7}`)}
	require.NoError(t, store.AppendStep(ctx, rec.ID, rec.Lease, charge))
	assert.Equal(t, "6:charge,6:ch\x00,:1,", client.HGet(ctx, key, "steps").Val())
	require.NoError(t, store.AppendStep(ctx, rec.ID, rec.Lease, ledger))
	assert.Equal(t, "6:charge,6:ch\x00,:1,6:ledger,11:{\"entry\":7},", client.HGet(ctx, key, "steps").Val())
	assertKeyExpiry(t, client, key, rec.ExpiresAt)

	end := now.Add(-time.Millisecond)
	require.NoError(t, store.Suspend(ctx, rec.ID, rec.Lease, end))
	assert.Equal(t, strconv.FormatInt(end.UnixMilli(), 10), client.HGet(ctx, key, "in_progress_expiration").Val())
	assert.Equal(t, "1", client.HGet(ctx, key, "suspended").Val())
	assert.Equal(t, 8, int(client.HLen(ctx, key).Val()), "fields after Suspend: %v", client.HKeys(ctx, key).Val())
	assertKeyExpiry(t, client, key, rec.ExpiresAt)

	// The resuming claim writes its own record, with the steps, and moves
	// the key's expiry to its own.
	next := rec
	next.Lease = randomHex(16)
	next.LeaseExpiresAt = now.Add(time.Minute)
	next.ExpiresAt = now.Add(2 * time.Hour)
	res, err := store.Claim(ctx, next, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, Resumed: true, Steps: []storage.Step{charge, ledger}}, res)
	assert.Equal(t, map[string]string{
		"status":                 "INPROGRESS",
		"expiration":             strconv.FormatInt(next.ExpiresAt.Unix(), 10),
		"in_progress_expiration": strconv.FormatInt(next.LeaseExpiresAt.UnixMilli(), 10),
		"lease":                  next.Lease,
		"validation":             next.Fingerprint,
		"version":                "1",
		"steps":                  "6:charge,6:ch\x00,:1,6:ledger,11:{\"entry\":7},",
	}, client.HGetAll(ctx, key).Val())
	assertKeyExpiry(t, client, key, next.ExpiresAt)

	// Get (the operator read) decodes the steps with the same decoder.
	got, err := store.Get(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, []storage.Step{charge, ledger}, got.Steps)

	done := completedRecord(next, []byte("p"), now)
	require.NoError(t, store.Complete(ctx, done))
	assert.False(t, client.HExists(ctx, key, "steps").Val(), "steps field after Complete")
	assertKeyExpiry(t, client, key, done.ExpiresAt)
}

// TestCompleteDropsSuspended: Complete removes the suspended field along
// with the steps, whichever fields the completion writes.
func TestCompleteDropsSuspended(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	for _, tt := range []struct {
		name string
		data []byte
	}{{"with data", []byte("p")}, {"without data", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			rec := claimNew(t, store, now)
			key := store.Key(rec.ID)
			require.NoError(t, store.Suspend(ctx, rec.ID, rec.Lease, now.Add(-time.Millisecond)))
			require.Equal(t, "1", client.HGet(ctx, key, "suspended").Val())
			require.NoError(t, store.Complete(ctx, completedRecord(rec, tt.data, now)))
			assert.False(t, client.HExists(ctx, key, "suspended").Val(), "suspended field after Complete")
			got, err := store.Get(ctx, rec.ID)
			require.NoError(t, err)
			assert.False(t, got.Suspended)
		})
	}
}

// TestClaimRetriedOwnLeaseReturnsSteps: a claim retried after its first
// response was lost writes nothing, and hands over the steps the first
// response carried, so the owner still resumes.
func TestClaimRetriedOwnLeaseReturnsSteps(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	step := storage.Step{Name: "charge", Data: []byte("c")}
	require.NoError(t, store.AppendStep(ctx, rec.ID, rec.Lease, step))
	before := client.HGetAll(ctx, store.Key(rec.ID)).Val()

	res, err := store.Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, Steps: []storage.Step{step}}, res)
	assert.Equal(t, before, client.HGetAll(ctx, store.Key(rec.ID)).Val())
}

// TestAppendStepSizeIsExact: AppendStep measures the record as Complete does
// (the key plus every field name and value), on the server: the largest
// step that fits is written, one byte more is refused and writes nothing.
func TestAppendStepSizeIsExact(t *testing.T) {
	t.Parallel()
	const limit = 4096
	store, client := newStore(t, func(o *redisstore.Options) { o.MaxItemBytes = limit })
	ctx := ctxT(t)
	now := time.Now()
	rec := claimNew(t, store, now)
	key := store.Key(rec.ID)
	first := storage.Step{Name: "first", Data: []byte("1")}
	require.NoError(t, store.AppendStep(ctx, rec.ID, rec.Lease, first))

	size := len(key)
	for f, v := range client.HGetAll(ctx, key).Val() {
		size += len(f) + len(v)
	}
	// With "4:last,NNNN:" and a trailing ",": the data's length has 4 digits.
	room := limit - size - len("4:last,") - len("NNNN:,")
	require.Len(t, strconv.Itoa(room), 4)
	err := store.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "last", Data: bytes.Repeat([]byte{'y'}, room+1)})
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Contains(t, err.Error(), strconv.Itoa(limit+1)+" bytes (limit 4096)")
	assert.Equal(t, redisstore.EncodeStep(first), client.HGet(ctx, key, "steps").Val(), "steps after a refused append")

	last := storage.Step{Name: "last", Data: bytes.Repeat([]byte{'x'}, room)}
	require.NoError(t, store.AppendStep(ctx, rec.ID, rec.Lease, last))
	got := 0 + len(key)
	for f, v := range client.HGetAll(ctx, key).Val() {
		got += len(f) + len(v)
	}
	assert.Equal(t, limit, got)

	// The completion drops the steps, so it fits again.
	require.NoError(t, store.Complete(ctx, completedRecord(rec, []byte("p"), now)))
}

// TestCorruptSteps: steps a claim would keep but cannot decode refuse the
// claim, without writing (resuming past unknown steps, or dropping them and
// re-running their side effects, would both be wrong); a claim that drops
// them anyway (one without a fingerprint) replaces the record as usual; a refused
// claim reports the record as corrupt. The script's check and the Go
// decoder agree on each value.
func TestCorruptSteps(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	now := time.Now()
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	lapsed := strconv.FormatInt(now.Add(-time.Second).UnixMilli(), 10)
	plant := func(t *testing.T, rec storage.Record, leaseEnd, steps string) string {
		t.Helper()
		key := store.Key(rec.ID)
		require.NoError(t, client.HSet(ctxT(t), key, "status", "INPROGRESS", "expiration", exp,
			"in_progress_expiration", leaseEnd, "lease", "other", "validation", rec.Fingerprint,
			"version", "1", "steps", steps).Err())
		require.NoError(t, client.Expire(ctxT(t), key, time.Hour).Err())
		return key
	}
	for _, bad := range []string{"x", "1:a,", "6:charge", "1:a;0:,", "-1:a,0:,", "1:a,0:,99999999999999999999:b,0:,", "01:a,1:b,2:c,"} {
		t.Run(strconv.Quote(bad), func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			_, decodeErr := redisstore.DecodeSteps(bad)
			require.Error(t, decodeErr, "the Go decoder accepts %q", bad)

			rec := liveRecord(now)
			key := plant(t, rec, lapsed, bad)
			before := client.HGetAll(ctx, key).Val()
			res, err := store.Claim(ctx, rec, now)
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			assert.Contains(t, err.Error(), `"steps"`)
			assert.Equal(t, storage.ClaimResult{}, res)
			assert.Equal(t, before, client.HGetAll(ctx, key).Val(), "the record after a refused resuming claim")

			// A claim without a fingerprint may take the record over (the
			// liveness rule) but not resume it: it drops the steps unread.
			other := rec
			other.Fingerprint = ""
			res, err = store.Claim(ctx, other, now)
			require.NoError(t, err)
			assert.Equal(t, storage.ClaimResult{Claimed: true, TookOver: true}, res, "a takeover without a fingerprint drops the steps")
			assert.False(t, client.HExists(ctx, key, "steps").Val())

			live := liveRecord(now)
			plant(t, live, strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10), bad)
			_, err = store.Claim(ctx, rival(live, now), now)
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord, "a refused claim of a record with unreadable steps")
			assert.Contains(t, err.Error(), `"steps"`)
		})
	}

	t.Run("OddButValid", func(t *testing.T) {
		// Empty names and data, separators inside values, leading zeros in
		// lengths (never written, read as the number): both sides accept.
		t.Parallel()
		ctx := ctxT(t)
		rec := liveRecord(now)
		plant(t, rec, lapsed, "0:,0:,3:a,:,02:,1,")
		res, err := store.Claim(ctx, rec, now)
		require.NoError(t, err)
		assert.Equal(t, []storage.Step{{}, {Name: "a,:", Data: []byte(",1")}}, res.Steps)
	})
}

func rival(rec storage.Record, now time.Time) storage.Record {
	rec.Lease = randomHex(16)
	rec.LeaseExpiresAt = now.Add(time.Minute)
	return rec
}

// TestStepsForeignKeyType: AppendStep and Suspend on a key of another Redis
// type report it and leave it alone.
func TestStepsForeignKeyType(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	rec := liveRecord(time.Now())
	key := store.Key(rec.ID)
	require.NoError(t, client.RPush(ctx, key, "not a record").Err())
	require.NoError(t, client.Expire(ctx, key, time.Hour).Err())

	err := store.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "s"})
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	err = store.Suspend(ctx, rec.ID, rec.Lease, time.Now())
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.Equal(t, []string{"not a record"}, client.LRange(ctx, key, 0, -1).Val())
}

// TestWrapStepsResumeAfterTakeover runs idempotent.Step over the Redis
// store: an owner records its first step and hangs; a retry arriving after
// its lease takes the record over and resumes, getting the recorded step
// back without running it; the hung owner, fenced out, cannot record.
func TestWrapStepsResumeAfterTakeover(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	var charges, ledgers atomic.Int32
	charged := make(chan struct{})
	resume := make(chan struct{})
	handler := func(hang bool) func(context.Context, string) (string, error) {
		return func(ctx context.Context, id string) (string, error) {
			ch, err := idempotent.Step(ctx, "charge", func(context.Context) (string, error) {
				return "ch_" + strconv.Itoa(int(charges.Add(1))), nil
			})
			if err != nil {
				return "", err
			}
			if hang {
				close(charged)
				<-resume
			}
			entry, err := idempotent.Step(ctx, "ledger", func(context.Context) (string, error) {
				return "led_" + strconv.Itoa(int(ledgers.Add(1))), nil
			})
			if err != nil {
				return "", err
			}
			return ch + "/" + entry, nil
		}
	}
	engine := func(clock time.Duration) *idempotent.Engine {
		return idempotent.New(store,
			idempotent.WithPrefix("steps"), quiet, idempotent.WithMaxLease(time.Minute),
			idempotent.WithClock(func() time.Time { return time.Now().Add(clock) }),
		)
	}
	byID := idempotent.WithKey(func(id string) (string, error) { return id, nil })
	owner := idempotent.Wrap(engine(0), handler(true), byID)
	retry := idempotent.Wrap(engine(10*time.Minute), handler(false), byID)
	id := randomHex(8)

	ownerErr := make(chan error, 1)
	go func() {
		_, err := owner(ctx, id)
		ownerErr <- err
	}()
	<-charged

	out, err := retry(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "ch_1/led_1", out, "the retry resumes after the recorded charge")
	assert.Equal(t, int32(1), charges.Load(), "charges")

	close(resume)
	require.Error(t, <-ownerErr, "the hung owner, taken over")
	assert.Equal(t, int32(2), ledgers.Load(), "the hung owner's ledger step ran, but was not recorded")

	again, err := retry(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, out, again, "a replay after the takeover's completion")
}
