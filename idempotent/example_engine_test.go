package idempotent_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idempotent"
)

// An Engine is the byte-level core that every front door calls: here, a
// front door of its own that already knows the key and the payload.
func ExampleEngine_Do() {
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithPrefix("webhooks"))
	deliveries := 0
	deliver := func(ctx context.Context) ([]byte, error) {
		deliveries++
		return []byte(`{"status":"delivered"}`), nil
	}
	call := idempotent.Call{Key: "evt_123", Payload: []byte(`{"type":"invoice.paid"}`)}

	first, _ := engine.Do(context.Background(), call, deliver)
	retry, _ := engine.Do(context.Background(), call, deliver)
	fmt.Printf("first: ran=%v %s\n", first.Ran, first.Response)
	fmt.Printf("retry: ran=%v %s\n", retry.Ran, retry.Response)
	fmt.Println("deliveries:", deliveries)
	// Output:
	// first: ran=true {"status":"delivered"}
	// retry: ran=false {"status":"delivered"}
	// deliveries: 1
}

// Concurrent duplicates in one process share one claim: with
// WithWaitInProgress they get the first one's response from memory.
func ExampleEngine_Do_coalescing() {
	engine := idempotent.New(idempotent.NewMemoryStore(), idempotent.WithWaitInProgress((15 * time.Minute)))
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
	fmt.Println("ran:", ran, "replayed:", replayed)
	// Output:
	// ran: 1 replayed: 2
}

// RecordID names the record of a raw key, as every front door derives it:
// an operator can find the record of a key from a support ticket.
func ExampleRecordID() {
	fmt.Println(idempotent.RecordID("payments", "", "order-1"))
	// Output:
	// payments#16cf97b96b9546f1cdad6a6b28b71c812e4f5b5d79c258b1cfe02f7684429c7d
}
