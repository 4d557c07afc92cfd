// This program must not compile: a key function for another input type than
// the handler's (TestTypedOptionsOfAnotherTypeDoNotCompile).
package main

import (
	"context"

	"github.com/idemkit/idemkit/idempotent"
)

type order struct{ ID string }

func main() {
	handle := func(context.Context, *order) (string, error) { return "", nil }
	key := func(o order) (string, error) { return o.ID, nil } // order, not *order
	_ = idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), handle, idempotent.WithKey(key))
}
