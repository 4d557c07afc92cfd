package pgtrips_test

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/pgtrips"
)

func TestCountCountsWritesAndNeverPings(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:5432/db")
	require.NoError(t, err)
	var peer net.Conn
	cfg.ConnConfig.DialFunc = func(context.Context, string, string) (net.Conn, error) {
		c, p := net.Pipe()
		peer = p
		go func() { _, _ = io.Copy(io.Discard, p) }()
		return c, nil
	}
	writes := pgtrips.Count(cfg)

	conn, err := cfg.ConnConfig.DialFunc(context.Background(), "tcp", "127.0.0.1:5432")
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(); _ = peer.Close() })
	for _, msg := range []string{"one", "two", "three"} {
		_, err := conn.Write([]byte(msg))
		require.NoError(t, err)
	}
	assert.EqualValues(t, 3, writes.Load())
	assert.False(t, cfg.ShouldPing(context.Background(), pgxpool.ShouldPingParams{}))
}

func TestCountPassesDialErrorsOn(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:5432/db")
	require.NoError(t, err)
	refused := &net.OpError{Op: "dial", Err: io.ErrUnexpectedEOF}
	cfg.ConnConfig.DialFunc = func(context.Context, string, string) (net.Conn, error) { return nil, refused }
	writes := pgtrips.Count(cfg)
	_, err = cfg.ConnConfig.DialFunc(context.Background(), "tcp", "127.0.0.1:5432")
	require.ErrorIs(t, err, refused)
	assert.Zero(t, writes.Load())
}
