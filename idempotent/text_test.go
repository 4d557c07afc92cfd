package idempotent_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/internal/texttest"
)

// Text no store can hold (see Text in package storage) is refused before
// anything runs, the same on every store: a prefix when New runs, a step
// name with ErrInvalidStep before the step's function runs. Every store's
// tests run internal/texttest over it.

func TestDefaultPrefixFromTheEnvironment(t *testing.T) {
	store := idempotent.NewMemoryStore()
	// No environment variable holds a NUL byte (os.Setenv refuses one, and
	// execve's strings end at it): invalid UTF-8 and length remain.
	require.Error(t, os.Setenv("IDEMKIT_TEST_NUL", "a\x00b"))
	for _, tt := range []struct{ name, env, panic string }{
		{"invalid UTF-8", "orders\xff",
			"idempotent: New: the default prefix, AWS_LAMBDA_FUNCTION_NAME, is not valid UTF-8: give one with WithPrefix"},
		{"too long", strings.Repeat("f", 513),
			"idempotent: New: the default prefix, AWS_LAMBDA_FUNCTION_NAME, of 513 bytes (at most 512): give one with WithPrefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_FUNCTION_NAME", tt.env)
			assert.PanicsWithValue(t, tt.panic, func() { idempotent.New(store) }, "refused once, at start-up")
			assert.NotPanics(t, func() { idempotent.New(store, idempotent.WithPrefix("orders")) }, "WithPrefix replaces the default")
		})
	}
	t.Run("multibyte", func(t *testing.T) {
		t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "zahlungen-€")
		var id atomic.Value
		e := idempotent.New(store, quiet, idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) { id.Store(ev.RecordID) }))
		var c counter
		_, err := idempotent.Wrap(e, c.handle, idempotent.WithKey(orderKey))(context.Background(), order{ID: "o"})
		require.NoError(t, err)
		assert.Equal(t, idempotent.RecordID("zahlungen-€", "", "o"), id.Load())
	})
}

// TestTextNoStoreCanHold runs texttest's checks on the memory store, and
// counts the calls of a refused step: none reaches the store.
func TestTextNoStoreCanHold(t *testing.T) {
	t.Parallel()
	texttest.Run(t, idempotent.NewMemoryStore())
	t.Run("no step reaches the store", func(t *testing.T) {
		t.Parallel()
		store := newCountingStore()
		h := idempotent.Wrap(idempotent.New(store, quiet), func(ctx context.Context, o stepOrder) (string, error) {
			return idempotent.Step(ctx, "charge\x00", func(context.Context) (string, error) { return "ch", nil })
		}, idempotent.WithKey(stepOrderKey))
		_, err := h(context.Background(), stepOrder{Key: "k"})
		require.ErrorIs(t, err, idempotent.ErrInvalidStep)
		assert.Equal(t, [5]int32{1, 0, 0, 1, 0}, store.calls(), "claim, append, complete, release, suspend")
	})
}
