package pgstore_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/pgstore"
)

// A store on the service's pool, its table created at start-up.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store := pgstore.New(pool, func(o *pgstore.Options) { o.Table = "payments_idempotency" })
	if err := store.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	http.Handle("POST /payments", nethttp.Middleware(idempotent.New(store))(http.HandlerFunc(createPayment)))
}

// The handler inserts its row in the run's transaction: the row commits with
// the idempotency record, or not at all.
func ExampleTx() {
	handler := func(ctx context.Context, c charge) (int64, error) {
		tx, err := pgstore.Tx(ctx)
		if err != nil {
			return 0, err
		}
		var id int64
		err = tx.QueryRow(ctx, `INSERT INTO payments (order_id, cents) VALUES ($1, $2) RETURNING id`, c.Order, c.Cents).Scan(&id)
		return id, err
	}
	var store *pgstore.Store // pgstore.New(pool)
	_ = idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(chargeKey))
}

// A scheduled job deletes expired records: PostgreSQL has no TTL.
func ExampleStore_DeleteExpired() {
	var store *pgstore.Store // pgstore.New(pool)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := store.DeleteExpired(ctx, time.Now(), 1000)
	if err != nil {
		log.Printf("sweep stopped after %d records: %v", n, err)
	}
}

func createPayment(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }
