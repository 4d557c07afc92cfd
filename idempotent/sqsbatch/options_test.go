package sqsbatch_test

import (
	"bytes"
	"context"
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
		// In no fixed order: a message's outcome is reported when its
		// completion lands, which may come after the next message's.
		want := []string{"m1:executed", "m2:rejected"}
		assert.ElementsMatch(t, want, first.all())
		assert.ElementsMatch(t, want, second.all(), "hooks compose: each one hears of every message")
	})
	t.Run("logger", func(t *testing.T) {
		t.Parallel()
		var buf testlog.Buffer
		e := newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&buf)))
		_, err := sqsbatch.Wrap(e, newRecorder().handle)(context.Background(), ev)
		require.NoError(t, err)
		// Every line names its message; each message's lines come in order.
		assert.Equal(t, map[string][]string{
			"m1": {"idempotent: executed"},
			"m2": {"sqsbatch: message cannot be processed", "idempotent: rejected"},
		}, linesByMessage(logLines(t, bytes.NewBufferString(buf.String()))))
	})
}
