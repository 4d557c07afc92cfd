package pgtrips

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Count makes every connection cfg's pool opens count its writes (round
// trips) in the returned counter, and makes the pool never ping a
// connection it hands out: pgxpool's default pings one that sat idle for
// more than a second, one more round trip after any pause. Counts stay
// exact per invocation with one connection in use at a time (MaxConns 1, or
// one caller); the connection's start-up and the first use of each
// statement on it (pgx prepares it: one more round trip) are counted too, so
// measure on a warm connection.
func Count(cfg *pgxpool.Config) *atomic.Int64 {
	var writes atomic.Int64
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, writes: &writes}, nil
	}
	return &writes
}

// countingConn counts its writes.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}
