package idempotent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// A caller's later change to the response it got, or to a replay, never
// reaches the stored record; with the local cache, replays come from the
// cached record, and must not hand it out either.
func TestMemoryStoreKeepsResponseFromCallerChanges(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []idempotent.Option
	}{
		{"no cache", nil},
		{"local cache", []idempotent.Option{idempotent.WithLocalCache(16)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := idempotent.New(idempotent.NewMemoryStore(), tt.opts...)
			ctx := context.Background()
			call := idempotent.Call{Key: "k"}
			res, err := e.Do(ctx, call, func(context.Context) ([]byte, error) { return []byte("stored"), nil })
			require.NoError(t, err)
			require.True(t, res.Ran)
			copy(res.Response, "XXXXXX")
			for range 3 {
				res, err = e.Do(ctx, call, func(context.Context) ([]byte, error) { panic("ran twice") })
				require.NoError(t, err)
				require.Equal(t, "stored", string(res.Response))
				copy(res.Response, "YYYYYY")
			}
		})
	}
}
