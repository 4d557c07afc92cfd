package texttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Run runs the checks on store, each a parallel subtest on keys of its own.
func Run(t *testing.T, store storage.StepStore) {
	t.Helper()
	quiet := idempotent.WithLogger(slog.New(slog.DiscardHandler))
	for _, prefix := range []string{"orders\x00", "\x00", "orders\xff", "\xc3"} {
		t.Run(fmt.Sprintf("prefix %q", prefix), func(t *testing.T) {
			t.Parallel()
			assert.Panics(t, func() { idempotent.New(store, idempotent.WithPrefix(prefix)) }, "New")
		})
	}
	for _, name := range []string{"charge\x00", "\x00", "charge\xff", "\xc3"} {
		t.Run(fmt.Sprintf("step %q", name), func(t *testing.T) {
			t.Parallel()
			var ran atomic.Int32
			h := idempotent.Wrap(idempotent.New(store, quiet, idempotent.WithPrefix("texttest")), func(ctx context.Context, key string) (string, error) {
				return idempotent.Step(ctx, name, func(context.Context) (string, error) { ran.Add(1); return "ch", nil })
			}, idempotent.WithKey(func(key string) (string, error) { return key, nil }))
			key := randomKey()
			for try := 1; try <= 3; try++ {
				_, err := h(context.Background(), key)
				require.ErrorIs(t, err, idempotent.ErrInvalidStep, "try %d", try)
				assert.False(t, errors.Is(err, idempotent.ErrStore) || errors.Is(err, idempotent.ErrStepNotRecorded),
					"try %d: %v, want ErrInvalidStep alone", try, err)
			}
			assert.Zero(t, ran.Load(), "the step's function ran")
		})
	}
	t.Run("multibyte", func(t *testing.T) {
		t.Parallel()
		// A multibyte prefix and step names, the longest included, work:
		// a retry after a handler error resumes the steps, running none
		// of them again.
		names := []string{"扣款 💳", "caf\u00e9", "cafe\u0301", strings.Repeat("🧾", storage.MaxStepNameBytes/4)}
		ran := make([]atomic.Int32, len(names))
		var fail atomic.Bool
		fail.Store(true)
		prefix := "zahlungen-€-" + strings.Repeat("支", 100)
		h := idempotent.Wrap(idempotent.New(store, quiet, idempotent.WithPrefix(prefix)), func(ctx context.Context, key string) (string, error) {
			got := make([]string, 0, len(names))
			for i, name := range names {
				v, err := idempotent.Step(ctx, name, func(context.Context) (string, error) { ran[i].Add(1); return name, nil })
				if err != nil {
					return "", err
				}
				got = append(got, v)
			}
			if fail.Swap(false) {
				return "", errors.New("downstream failed")
			}
			return strings.Join(got, "|"), nil
		}, idempotent.WithKey(func(key string) (string, error) { return key, nil }))
		key := "k-€-" + randomKey()
		_, err := h(context.Background(), key)
		require.EqualError(t, err, "downstream failed")
		got, err := h(context.Background(), key)
		require.NoError(t, err)
		assert.Equal(t, strings.Join(names, "|"), got)
		for i := range names {
			assert.Equal(t, int32(1), ran[i].Load(), "runs of step %q", names[i])
		}
	})
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
