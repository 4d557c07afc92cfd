package dynamostore_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	"github.com/idemkit/idemkit/internal/texttest"
)

// TestTextNoStoreCanHold: text some store cannot hold is refused by the
// engine before anything runs, on DynamoDB Local in both layouts as on every
// store.
func TestTextNoStoreCanHold(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newLocalStore(t, client, l)
			texttest.Run(t, store)
		})
	}
}
