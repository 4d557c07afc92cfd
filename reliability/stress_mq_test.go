package reliability_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/rabbitmqbatch"
)

// errMQInjected is the handler failure stressRabbitMQ injects.
var errMQInjected = errors.New("stress: injected failure")

// stressRabbitMQ delivers every one of -stress.keys RabbitMQ messages
// -stress.copies times, in batches of 1 to 10 taken in random order by
// -stress.workers workers at once, through rabbitmqbatch on DynamoDB Local,
// with a fifth of the handler calls failing. Amazon MQ takes no partial
// response: a batch answered with an error is delivered again whole, as the
// broker does, until it is answered with nil. Each message's side effect
// happens exactly once.
func stressRabbitMQ(t *testing.T, store *dynamostore.Store, run string) {
	keys, workers := *stressKeys, *stressWorkers
	e := idempotent.New(store, idempotent.WithPrefix("stress-mq-"+run))
	var mu sync.Mutex
	effects := map[string]int{}
	handler := rabbitmqbatch.Wrap(e, func(_ context.Context, p struct {
		PaymentID string `json:"paymentId"`
	}) error {
		if rand.Float64() < 0.2 {
			return errMQInjected
		}
		mu.Lock()
		effects[p.PaymentID]++
		mu.Unlock()
		return nil
	})

	var pending [][]events.RabbitMQMessage
	var msgs []events.RabbitMQMessage
	for i := range keys {
		id, payment := fmt.Sprintf("mq-%s-%d", run, i), fmt.Sprintf("pay-mq-%s-%d", run, i)
		m := events.RabbitMQMessage{
			BasicProperties: events.RabbitMQBasicProperties{MessageID: &id, ContentType: "application/json"},
			Data:            base64.StdEncoding.EncodeToString([]byte(`{"paymentId":"` + payment + `"}`)),
		}
		for range *stressCopies {
			msgs = append(msgs, m)
		}
	}
	rand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	for len(msgs) > 0 {
		n := min(len(msgs), 1+rand.IntN(10))
		pending, msgs = append(pending, msgs[:n:n]), msgs[n:]
	}

	var (
		qmu         sync.Mutex
		inFlight    int
		deliveries  int
		redelivered int
	)
	take := func() ([]events.RabbitMQMessage, bool) {
		for {
			qmu.Lock()
			if len(pending) > 0 {
				b := pending[0]
				pending = pending[1:]
				inFlight++
				deliveries++
				qmu.Unlock()
				return b, true
			}
			done := inFlight == 0
			qmu.Unlock()
			if done {
				return nil, false
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				b, ok := take()
				if !ok {
					return
				}
				err := handler(context.Background(), events.RabbitMQEvent{MessagesByQueue: map[string][]events.RabbitMQMessage{"payments::/": b}})
				qmu.Lock()
				inFlight--
				if err != nil {
					assert.ErrorIs(t, err, rabbitmqbatch.ErrNotDone)
					if time.Now().Before(deadline) {
						for i := range b {
							b[i].Redelivered = true
						}
						pending = append(pending, b) // the broker delivers the whole batch again
						redelivered++
					}
				}
				qmu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, pending, "batches still undelivered at the deadline")
	require.Len(t, effects, keys, "every message's side effect happened")
	for payment, n := range effects {
		require.Equal(t, 1, n, "side effects of %s", payment)
	}
	t.Logf("rabbitmq: %d messages x %d deliveries in %d batch deliveries (%d whole-batch redeliveries)", keys, *stressCopies, deliveries, redelivered)
}
