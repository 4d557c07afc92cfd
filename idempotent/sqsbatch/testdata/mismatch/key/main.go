// This program must not compile: a key function for another message type
// than the handler's (TestOptionsOfAnotherTypeDoNotCompile).
package main

import (
	"context"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

type order struct{ ID string }

func main() {
	handle := func(context.Context, *order) error { return nil }
	key := func(o order) (string, error) { return o.ID, nil } // order, not *order
	_ = sqsbatch.Wrap(idempotent.New(idempotent.NewMemoryStore()), handle, sqsbatch.WithKey(key))
}
