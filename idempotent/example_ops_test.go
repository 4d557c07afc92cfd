package idempotent_test

// The log lines of docs/operations.md, which quotes this example
// (internal/doccheck checks that the quote matches); `go test` checks the
// output.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// downStore is a storage.Store whose table is unreachable.
type downStore struct{}

func (downStore) Claim(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
	return storage.ClaimResult{}, errors.New("ThrottlingException: rate exceeded")
}
func (downStore) Complete(context.Context, storage.Record) error                 { return nil }
func (downStore) Release(context.Context, string, string) error                  { return nil }
func (downStore) AppendStep(context.Context, string, string, storage.Step) error { return nil }
func (downStore) Suspend(context.Context, string, string, time.Time) error       { return nil }

// Each invocation logs one line, "idempotent: <outcome>", with the hashed
// record ID (never the raw key or payload). Lambda reads JSON lines on
// stdout as structured logs; set the level to DEBUG to see every outcome,
// as executed and replayed are logged at DEBUG.
func ExampleWithLogger() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the example's output stable
			}
			return a
		},
	}))
	clock := idempotent.WithClock(func() time.Time { return time.Unix(1_800_000_000, 0) })
	key := idempotent.WithKey(func(id string) (string, error) { return id, nil })
	echo := func(ctx context.Context, id string) (string, error) { return id, nil }

	engine := idempotent.New(idempotent.NewMemoryStore(), clock, idempotent.WithPrefix("orders"), idempotent.WithLogger(logger))
	h := idempotent.Wrap(engine, echo, key)
	_, _ = h(context.Background(), "order-1") // executed
	_, _ = h(context.Background(), "order-1") // replayed

	down := idempotent.Wrap(idempotent.New(downStore{}, clock, idempotent.WithPrefix("orders"), idempotent.WithLogger(logger)), echo, key)
	_, _ = down(context.Background(), "order-2") // the table is throttled: the handler does not run
	// Output:
	// {"level":"DEBUG","msg":"idempotent: executed","outcome":"executed","record_id":"orders#b997ed497057a39ed373568f77d34c5c284b0b2722179d1f949fbba6b5ec9e98","handler_ran":true,"duration":0}
	// {"level":"DEBUG","msg":"idempotent: replayed","outcome":"replayed","record_id":"orders#b997ed497057a39ed373568f77d34c5c284b0b2722179d1f949fbba6b5ec9e98","handler_ran":false,"duration":0}
	// {"level":"ERROR","msg":"idempotent: store_error","outcome":"store_error","record_id":"orders#feb919febf70a67a9632f601adf190ca65b2fcfaf97ff4d3eff9a72a1815b446","handler_ran":false,"duration":0,"error":"idempotent: store failed: claim: ThrottlingException: rate exceeded"}
}

// A tool of an operator's reads, lists and deletes records through
// storage.AdminStore, which every store of the module implements (here the
// in-memory one; the idemkit command does the same on DynamoDB, Redis and
// PostgreSQL). Delete is conditioned on the record as read: deleting it
// lets its key run again.
func Example_adminStore() {
	ctx := context.Background()
	store := idempotent.NewMemoryStore()
	clock := idempotent.WithClock(func() time.Time { return time.Unix(1_800_000_000, 0) })
	key := idempotent.WithKey(func(id string) (string, error) { return id, nil })
	echo := func(ctx context.Context, id string) (string, error) { return id, nil }
	h := idempotent.Wrap(idempotent.New(store, clock, idempotent.WithPrefix("orders")), echo, key)
	_, _ = h(ctx, "order-1")

	admin := store.(storage.AdminStore)
	var found []storage.Record
	err := admin.Scan(ctx, storage.ScanOptions{IDPrefix: "orders#"}, func(rec storage.Record, err error) bool {
		if err == nil {
			found = append(found, rec)
		}
		return true
	})
	if err != nil {
		panic(err)
	}
	for _, rec := range found {
		fmt.Println(rec.ID, rec.Status)
		fmt.Println("delete:", admin.Delete(ctx, rec))
	}
	_, err = admin.Get(ctx, found[0].ID)
	fmt.Println("gone:", errors.Is(err, storage.ErrNotFound))
	// Output:
	// orders#b997ed497057a39ed373568f77d34c5c284b0b2722179d1f949fbba6b5ec9e98 COMPLETED
	// delete: <nil>
	// gone: true
}
