package idempotent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idemkit/idempotent"
)

// The Engine is the byte-level core that every front door calls: here, a
// front door of its own that already knows the key and the payload.
func TestEngineDo(t *testing.T) {
	t.Parallel()
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("webhooks"))
	deliveries := 0
	deliver := func(ctx context.Context) ([]byte, error) {
		deliveries++
		return []byte(`{"status":"delivered"}`), nil
	}
	call := idempotent.Call{Key: "evt_123", Payload: []byte(`{"type":"invoice.paid"}`)}

	first, err := engine.Do(context.Background(), call, deliver)
	assert.NoError(t, err)
	retry, err := engine.Do(context.Background(), call, deliver)
	assert.NoError(t, err)
	assert.Equal(t, idempotent.Result{Response: []byte(`{"status":"delivered"}`), Ran: true}, first)
	assert.Equal(t, []byte(`{"status":"delivered"}`), retry.Response)
	assert.False(t, retry.Ran)
	assert.Equal(t, idempotent.RecordID("webhooks", "", "evt_123"), retry.Replay.RecordID)
	assert.False(t, retry.Replay.ExpiresAt.IsZero())
	assert.Equal(t, 1, deliveries)
}

// Concurrent duplicates in one process share one claim: with
// WithWaitInProgress they get the first one's response from memory.
func TestEngineDoCoalescing(t *testing.T) {
	t.Parallel()
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithWaitInProgress(15*time.Minute))
	release := make(chan struct{})
	var runs sync.WaitGroup
	runs.Add(1)
	work := func(ctx context.Context) ([]byte, error) {
		runs.Done() // a second run would panic here: the WaitGroup goes negative
		<-release
		return []byte("42"), nil
	}
	results := make(chan idempotent.Result, 3)
	for range 3 {
		go func() {
			res, _ := engine.Do(context.Background(), idempotent.Call{Key: "k"}, work)
			results <- res
		}()
	}
	runs.Wait() // one of them runs the work
	close(release)
	ran, replayed := 0, 0
	for range 3 {
		res := <-results
		switch {
		case res.Ran:
			ran++
		case string(res.Response) == "42": // shared from memory, or replayed from the store
			replayed++
		}
	}
	assert.Equal(t, 1, ran)
	assert.Equal(t, 2, replayed)
}

// RecordID names the record of a raw key, as every front door derives it:
// an operator can find the record of a key from a support ticket.
func ExampleRecordID() {
	fmt.Println(idempotent.RecordID("payments", "", "order-1"))
	// Output:
	// payments#16cf97b96b9546f1cdad6a6b28b71c812e4f5b5d79c258b1cfe02f7684429c7d
}
