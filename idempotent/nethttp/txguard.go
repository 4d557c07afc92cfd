package nethttp

import (
	"context"
	"fmt"
	"sync"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// txGuard stands between a handler and its run's transaction (a store's
// accessor, such as dynamostore.Transaction, finds it in the request's
// context): the handler's writes commit with its completion when it
// returns, so the response must not reach the client before then. Once a
// transaction is open, the capture holds the response (a Flush or a body
// past the limit no longer passes it through) until the commit is settled;
// once the response has reached the client, a transaction is refused
// (storage.ErrNoTx): its writes could fail to commit after the client saw a
// success. Safe for concurrent use: a handler may ask from another
// goroutine.
type txGuard struct {
	parent context.Context // the core's context, which holds the run's transaction

	mu   sync.Mutex
	open bool // the handler opened the transaction
	sent bool // the response began to reach the client
}

// OpenTx implements storage.TxOpener.
func (g *txGuard) OpenTx(ctx context.Context) (storage.Tx, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sent {
		return nil, fmt.Errorf("%w: the response already began to reach the client (it was flushed, passed the buffer limit, "+
			"or the request has no Idempotency-Key and the handler wrote first): open the transaction before writing the response", storage.ErrNoTx)
	}
	tx, err := storage.TxFromContext(unguarded{Context: ctx, g: g})
	if err == nil {
		g.open = true
	}
	return tx, err
}

// send reports whether the response may now reach the client, and notes
// that it does: not while a transaction is open.
func (g *txGuard) send() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return false
	}
	g.sent = true
	return true
}

// unguarded is the handler's context as the core made it: the guard's
// transaction slot answers with the core's, so the core still sees the
// handler's own context (inside a step, say).
type unguarded struct {
	context.Context
	g *txGuard
}

func (c unguarded) Value(key any) any {
	v := c.Context.Value(key)
	if g, ok := v.(*txGuard); ok && g == c.g {
		return c.g.parent.Value(key)
	}
	return v
}
