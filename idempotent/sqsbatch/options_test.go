package sqsbatch_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/internal/testlog"
)

// hookLog collects "message:outcome" per outcome event.
type hookLog struct {
	mu     sync.Mutex
	events []string
}

func (h *hookLog) hook(ctx context.Context, ev idempotent.Event) {
	m, _ := sqsbatch.MessageFromContext(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, m.MessageId+":"+ev.Outcome.String())
}

func (h *hookLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// TestEngineSettings: the Engine's outcome hooks and logger are the only
// ones, and hear of every message: the core's outcomes, and the messages this
// package rejects before the core (a body it cannot decode), each with its
// message in the hook's context and its "message_id" in every log line.
func TestEngineSettings(t *testing.T) {
	t.Parallel()
	ev := batch(msg("m1", body("a", 1)), msg("m2", "not json"))
	t.Run("hooks", func(t *testing.T) {
		t.Parallel()
		var first, second hookLog
		e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(first.hook), idempotent.WithOutcomeHook(second.hook))
		_, err := sqsbatch.Wrap(e, newRecorder().handle)(context.Background(), ev)
		require.NoError(t, err)
		want := []string{"m1:executed", "m2:rejected"}
		assert.Equal(t, want, first.all())
		assert.Equal(t, want, second.all(), "hooks compose: each one hears of every message")
	})
	t.Run("logger", func(t *testing.T) {
		t.Parallel()
		var buf testlog.Buffer
		e := newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&buf)))
		_, err := sqsbatch.Wrap(e, newRecorder().handle)(context.Background(), ev)
		require.NoError(t, err)
		var got, ids []string
		for _, l := range logLines(t, bytes.NewBufferString(buf.String())) {
			got = append(got, l["msg"].(string))
			id, _ := l["message_id"].(string)
			ids = append(ids, id)
		}
		assert.Equal(t, []string{"idempotent: executed", "sqsbatch: message cannot be processed", "idempotent: rejected"}, got)
		assert.Equal(t, []string{"m1", "m2", "m2"}, ids, "every line names its message")
	})
}

// A key function's error is reported to the outcome hook as the core's
// rejection (ErrInvalidKey), with the message in the hook's context.
func TestKeyErrorReachesTheHook(t *testing.T) {
	t.Parallel()
	errNoKey := errors.New("no key")
	var mu sync.Mutex
	var got []idempotent.Event
	var ids []string
	e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(func(ctx context.Context, ev idempotent.Event) {
		m, _ := sqsbatch.MessageFromContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		got, ids = append(got, ev), append(ids, m.MessageId)
	}))
	h := sqsbatch.Wrap(e, newRecorder().handle,
		sqsbatch.WithKey(func(order) (string, error) { return "", errNoKey }))
	resp, err := h(context.Background(), batch(msg("m1", body("a", 1))))
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, failedIDs(resp))
	require.Len(t, got, 1)
	assert.Equal(t, []string{"m1"}, ids)
	assert.Equal(t, idempotent.OutcomeRejected, got[0].Outcome)
	assert.ErrorIs(t, got[0].Err, idempotent.ErrInvalidKey)
	assert.ErrorIs(t, got[0].Err, errNoKey)
	assert.False(t, got[0].HandlerRan)
}

// Under IDEMKIT_DISABLED every handler runs, as under idempotent.Wrap:
// a key or payload function is not asked, and its error fails nothing. Not
// parallel: it sets the environment.
func TestDisabledRunsEveryHandler(t *testing.T) {
	t.Setenv("IDEMKIT_DISABLED", "1")
	rec := newRecorder()
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), rec.handle,
		sqsbatch.WithKey(func(o order) (string, error) {
			if o.OrderID == "nokey" {
				return "", errors.New("no key")
			}
			return o.OrderID, nil
		}),
		sqsbatch.WithPayloadValidation(func(order) (any, error) { return nil, errors.New("no payload") }))
	resp, err := h(context.Background(), batch(msg("m1", body("nokey", 1)), msg("m2", body("a", 1)), msg("m3", body("a", 1)), msg("m4", body("fail", 1))))
	require.NoError(t, err)
	assert.Equal(t, []string{"m4"}, failedIDs(resp))
	assert.Equal(t, []string{"nokey", "a", "a", "fail"}, rec.Calls())
}
