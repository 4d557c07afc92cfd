// This program must not compile: a scope function for another input type than
// the handler's (TestTypedOptionsOfAnotherTypeDoNotCompile).
package main

import (
	"context"

	"github.com/idemkit/idemkit/idempotent"
)

type order struct{ ID string }

func main() {
	handle := func(context.Context, order) (string, error) { return "", nil }
	scope := func(_ context.Context, s string) (string, error) { return s, nil }
	_ = idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore()), handle, idempotent.WithScope(scope))
}
