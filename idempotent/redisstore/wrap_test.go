package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

type payment struct {
	OrderID string `json:"orderId"`
	Amount  int64  `json:"amount"`
}

type receipt struct {
	ChargeID string `json:"chargeId"`
	Amount   int64  `json:"amount"`
}

// quiet keeps the wrapper's outcome logs out of the test output.
var quiet = idempotent.WithLogger(slog.New(slog.DiscardHandler))

// events collects the outcomes a wrapped function reports.
type events struct {
	mu  sync.Mutex
	all []idempotent.Event
}

func (e *events) hook(_ context.Context, ev idempotent.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) last(t *testing.T) idempotent.Event {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	require.NotEmpty(t, e.all)
	return e.all[len(e.all)-1]
}

// TestWrapEndToEnd runs idempotent.Wrap over the Redis store: first run,
// replay, payload mismatch, and a handler error that releases the key so a
// retry runs again.
func TestWrapEndToEnd(t *testing.T) {
	t.Parallel()
	store, client := newStore(t)
	ctx := ctxT(t)
	var runs atomic.Int32
	failNext := atomic.Bool{}
	charge := func(ctx context.Context, p payment) (receipt, error) {
		n := runs.Add(1)
		if failNext.Swap(false) {
			return receipt{}, errors.New("card declined")
		}
		return receipt{ChargeID: fmt.Sprintf("ch_%d", n), Amount: p.Amount}, nil
	}
	var ev events
	e := idempotent.New(store, idempotent.WithPrefix("payments"), quiet, idempotent.WithOutcomeHook(ev.hook))
	handler := idempotent.Wrap(e, charge,
		idempotent.WithKey(func(p payment) (string, error) { return p.OrderID, nil }),
		idempotent.WithPayloadValidation(func(p payment) (any, error) { return p.Amount, nil }),
	)
	order := "order-" + randomHex(4)

	first, err := handler(ctx, payment{OrderID: order, Amount: 1500})
	require.NoError(t, err)
	assert.Equal(t, receipt{ChargeID: "ch_1", Amount: 1500}, first)
	executed := ev.last(t)
	assert.Equal(t, idempotent.OutcomeExecuted, executed.Outcome)
	key := store.Key(executed.RecordID)
	assert.Equal(t, "COMPLETED", client.HGet(ctx, key, "status").Val(), "the record in Redis")

	replay, err := handler(ctx, payment{OrderID: order, Amount: 1500})
	require.NoError(t, err)
	assert.Equal(t, first, replay)
	assert.Equal(t, idempotent.OutcomeReplayed, ev.last(t).Outcome)
	assert.Equal(t, int32(1), runs.Load(), "handler runs after a replay")

	_, err = handler(ctx, payment{OrderID: order, Amount: 9900})
	require.ErrorIs(t, err, idempotent.ErrPayloadMismatch)
	assert.Equal(t, int32(1), runs.Load(), "handler runs after a payload mismatch")

	// A handler error releases the key: the record is deleted and a retry runs.
	failed := "order-" + randomHex(4)
	failNext.Store(true)
	_, err = handler(ctx, payment{OrderID: failed, Amount: 700})
	require.EqualError(t, err, "card declined")
	released := ev.last(t)
	assert.Equal(t, idempotent.OutcomeHandlerError, released.Outcome)
	assert.Equal(t, int64(0), client.Exists(ctx, store.Key(released.RecordID)).Val(), "the released record")

	retry, err := handler(ctx, payment{OrderID: failed, Amount: 700})
	require.NoError(t, err)
	assert.Equal(t, receipt{ChargeID: "ch_3", Amount: 700}, retry)
	assert.Equal(t, idempotent.OutcomeExecuted, ev.last(t).Outcome)
}

// TestWrapConcurrentDuplicates: of many simultaneous deliveries of one key,
// the handler runs once; the others are told it is in progress or, once it
// completed, get its response.
func TestWrapConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	var runs atomic.Int32
	release := make(chan struct{})
	handler := idempotent.Wrap(idempotent.New(store, quiet, idempotent.WithPrefix("concurrent")), func(ctx context.Context, id string) (string, error) {
		runs.Add(1)
		<-release
		return "done " + id, nil
	}, idempotent.WithKey(func(id string) (string, error) { return id, nil }))

	id := randomHex(8)
	const n = 16
	var (
		wg         sync.WaitGroup
		inProgress atomic.Int32
		done       atomic.Int32
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := handler(ctx, id)
			switch {
			case errors.Is(err, idempotent.ErrInProgress):
				inProgress.Add(1)
			case err == nil && out == "done "+id:
				done.Add(1)
			default:
				t.Errorf("handler: %q, %v", out, err)
			}
		}()
	}
	// Let the duplicates find the record in progress, then let the owner finish.
	require.Eventually(t, func() bool { return inProgress.Load() == n-1 }, 10*time.Second, 5*time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, int32(1), done.Load())

	out, err := handler(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "done "+id, out)
	assert.Equal(t, int32(1), runs.Load())
}

// TestWrapTakeover: a record whose owner's lease lapsed (it crashed) is taken
// over, the handler runs again (by design), and the crashed owner is fenced.
func TestWrapTakeover(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := ctxT(t)
	var ev events
	later := 10 * time.Minute // the retry arrives after the crashed owner's lease
	e := idempotent.New(store,
		idempotent.WithPrefix("takeover"), quiet,
		idempotent.WithOutcomeHook(ev.hook),
		idempotent.WithClock(func() time.Time { return time.Now().Add(later) }),
	)
	handler := idempotent.Wrap(e, func(ctx context.Context, id string) (string, error) {
		return "ran " + id, nil
	}, idempotent.WithKey(func(id string) (string, error) { return id, nil }))

	// Find the record ID of the key, then plant a crashed owner's record.
	id := randomHex(8)
	probe := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("takeover"), quiet, idempotent.WithOutcomeHook(ev.hook)),
		func(ctx context.Context, id string) (string, error) { return "", nil },
		idempotent.WithKey(func(id string) (string, error) { return id, nil }))
	_, err := probe(ctx, id)
	require.NoError(t, err)
	recordID := ev.last(t).RecordID

	now := time.Now()
	crashed := liveRecord(now)
	crashed.ID = recordID
	crashed.Fingerprint = ""
	crashed.LeaseExpiresAt = now.Add(time.Minute)
	res, err := store.Claim(ctx, crashed, now)
	require.NoError(t, err)
	require.True(t, res.Claimed)

	out, err := handler(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "ran "+id, out)
	took := ev.last(t)
	assert.Equal(t, idempotent.OutcomeExecuted, took.Outcome)
	assert.True(t, took.TookOver, "TookOver of the retry")

	err = store.Complete(ctx, completedRecord(crashed, []byte("late"), now))
	require.ErrorIs(t, err, storage.ErrLeaseLost, "the crashed owner's late completion")
}
