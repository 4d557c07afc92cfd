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

// TestOptionPrecedence: this package's defaults, then WithIdempotentOptions,
// then this package's own options, whatever the order they are given in.
func TestOptionPrecedence(t *testing.T) {
	t.Parallel()
	ev := batch(msg("m1", body("a", 1)), msg("m2", "not json"))
	t.Run("hook", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name              string
			opts              func(own, core *hookLog) []sqsbatch.Option
			wantOwn, wantCore []string
		}{
			{
				name: "own after core",
				opts: func(own, core *hookLog) []sqsbatch.Option {
					return []sqsbatch.Option{sqsbatch.WithIdempotentOptions(idempotent.WithOutcomeHook(core.hook)), sqsbatch.WithOutcomeHook(own.hook)}
				},
				wantOwn: []string{"m1:executed", "m2:rejected"},
			},
			{
				name: "own before core",
				opts: func(own, core *hookLog) []sqsbatch.Option {
					return []sqsbatch.Option{sqsbatch.WithOutcomeHook(own.hook), sqsbatch.WithIdempotentOptions(idempotent.WithOutcomeHook(core.hook))}
				},
				wantOwn: []string{"m1:executed", "m2:rejected"},
			},
			{
				name: "core alone sees the core's outcomes",
				opts: func(_, core *hookLog) []sqsbatch.Option {
					return []sqsbatch.Option{sqsbatch.WithIdempotentOptions(idempotent.WithOutcomeHook(core.hook))}
				},
				wantCore: []string{"m1:executed"},
			},
			{
				name: "a nil hook is none",
				opts: func(_, core *hookLog) []sqsbatch.Option {
					return []sqsbatch.Option{sqsbatch.WithIdempotentOptions(idempotent.WithOutcomeHook(core.hook)), sqsbatch.WithOutcomeHook(nil)}
				},
				wantCore: []string{"m1:executed"},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				var own, core hookLog
				opts := append([]sqsbatch.Option{sqsbatch.WithLogger(quiet())}, tt.opts(&own, &core)...)
				_, err := sqsbatch.Wrap(idempotent.NewMemoryStore(), newRecorder().handle, opts...)(context.Background(), ev)
				require.NoError(t, err)
				assert.Equal(t, tt.wantOwn, own.all())
				assert.Equal(t, tt.wantCore, core.all())
			})
		}
	})
	t.Run("logger", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name     string
			ownFirst bool
		}{
			{name: "own after core"},
			{name: "own before core", ownFirst: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				var ownBuf, coreBuf testlog.Buffer
				own := sqsbatch.WithLogger(testlog.Logger(&ownBuf))
				core := sqsbatch.WithIdempotentOptions(idempotent.WithLogger(testlog.Logger(&coreBuf)))
				opts := []sqsbatch.Option{core, own}
				if tt.ownFirst {
					opts = []sqsbatch.Option{own, core}
				}
				_, err := sqsbatch.Wrap(idempotent.NewMemoryStore(), newRecorder().handle, opts...)(context.Background(), ev)
				require.NoError(t, err)
				var got []string
				for _, l := range logLines(t, bytes.NewBufferString(ownBuf.String())) {
					got = append(got, l["msg"].(string))
					assert.NotEmpty(t, l["message_id"], "record %v", l)
				}
				assert.Equal(t, []string{"idempotent: executed", "sqsbatch: message cannot be processed"}, got)
				assert.Empty(t, coreBuf.String())
			})
		}
	})
	t.Run("core logger alone", func(t *testing.T) {
		t.Parallel()
		var coreBuf testlog.Buffer
		_, err := sqsbatch.Wrap(idempotent.NewMemoryStore(), newRecorder().handle,
			sqsbatch.WithIdempotentOptions(idempotent.WithLogger(testlog.Logger(&coreBuf))))(context.Background(), batch(msg("m1", body("a", 1))))
		require.NoError(t, err)
		lines := logLines(t, bytes.NewBufferString(coreBuf.String()))
		require.Len(t, lines, 1)
		assert.Equal(t, "idempotent: executed", lines[0]["msg"])
		assert.NotContains(t, lines[0], "message_id", "a logger given to the core is used as given")
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
	h := sqsbatch.Wrap(idempotent.NewMemoryStore(), newRecorder().handle, sqsbatch.WithLogger(quiet()),
		sqsbatch.WithKey(func(order) (string, error) { return "", errNoKey }),
		sqsbatch.WithOutcomeHook(func(ctx context.Context, ev idempotent.Event) {
			m, _ := sqsbatch.MessageFromContext(ctx)
			mu.Lock()
			defer mu.Unlock()
			got, ids = append(got, ev), append(ids, m.MessageId)
		}))
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

// Under idempotent.DisableEnv every handler runs, as under idempotent.Wrap:
// a key or payload function is not asked, and its error fails nothing. Not
// parallel: it sets the environment.
func TestDisabledRunsEveryHandler(t *testing.T) {
	t.Setenv(idempotent.DisableEnv, "1")
	rec := newRecorder()
	h := sqsbatch.Wrap(idempotent.NewMemoryStore(), rec.handle, sqsbatch.WithLogger(quiet()),
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
