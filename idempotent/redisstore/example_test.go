package redisstore_test

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/redisstore"
)

type OrderEvent struct {
	OrderID string `json:"orderId"`
}

func shipOrder(ctx context.Context, e OrderEvent) (string, error) {
	return "shipped " + e.OrderID, nil
}

// A Lambda handler made idempotent with records in Redis. The client and the
// store are created once, in the init phase, and shared by every invocation.
// (No output: it needs a Redis server.)
func Example() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	store := redisstore.New(client)
	// Optional: cache the scripts now, so the first invocation pays one round
	// trip per store call, like every later one.
	if err := store.LoadScripts(context.Background()); err != nil {
		log.Printf("redis: %v", err) // not fatal: the first calls load them
	}
	lambda.Start(idempotent.Wrap(idempotent.New(store), shipOrder,
		idempotent.WithKey(func(e OrderEvent) (string, error) { return e.OrderID, nil }),
	))
}

// A store on a Redis Cluster (or any redis.UniversalClient), with its own key
// prefix and a larger record limit.
func ExampleNew() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs: []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
	})
	store := redisstore.New(client, func(o *redisstore.Options) {
		o.KeyPrefix = "orders:idem:"
		o.MaxItemBytes = 1 << 20
	})
	_ = store.Key("ship#0a1b") // "orders:idem:ship#0a1b", the key of that record
}
