// This program must not compile: a payload function of the typed message
// given to WrapMessage, whose handler takes the SQS message
// (TestOptionsOfAnotherTypeDoNotCompile).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
)

type order struct{ ID string }

func main() {
	handle := func(context.Context, events.SQSMessage) error { return nil }
	payload := func(o order) (any, error) { return o.ID, nil }
	_ = sqsbatch.WrapMessage(idempotent.New(idempotent.NewMemoryStore()), handle, sqsbatch.WithPayloadValidation(payload))
}
