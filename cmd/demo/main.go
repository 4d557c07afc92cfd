package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/localddb"
)

// timeout bounds the whole demo; it takes a few seconds.
const timeout = time.Minute

func main() {
	verbose := flag.Bool("v", false, "write the functions' JSON logs to stderr")
	keep := flag.Bool("keep", false, "keep the demo tables instead of deleting them (useful with your own AWS_ENDPOINT_URL_DYNAMODB: make demo's DynamoDB Local is in memory and stops with the demo)")
	flag.Parse()

	logs := io.Discard
	if *verbose {
		logs = os.Stderr
	}
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	os.Exit(run(ctx, os.Stdout, *keep))
}

// run runs the demo and returns the exit status.
func run(ctx context.Context, w io.Writer, keep bool) int {
	start := time.Now()
	client, err := localddb.Client(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n      run it as: make demo (or scripts/with-dynamodb.sh go run ./cmd/demo)\n", err)
		return 2
	}
	tables := localddb.UniqueTables("idemkit-demo")
	if err := localddb.CreateTables(ctx, client, tables); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		cleanup(client, tables)
		return 1
	}
	if keep {
		defer fmt.Fprintf(w, "Kept the tables %s, %s and %s.\n", tables.Idempotency, tables.Payments, tables.Inventory)
	} else {
		defer cleanup(client, tables)
	}

	d := newDemo(w, client, tables)
	fmt.Fprintf(w, "idemkit demo: the sample payments API and orders consumer, made idempotent, on DynamoDB Local (%s)\n", localddb.Endpoint())
	if err := d.story(ctx); err != nil {
		fmt.Fprintf(w, "\ndemo: %v\n", err)
		return 1
	}
	if err := d.show(ctx); err != nil {
		fmt.Fprintf(w, "\ndemo: %v\n", err)
		return 1
	}
	if err := d.inspect(ctx); err != nil {
		fmt.Fprintf(w, "\ndemo: %v\n", err)
		return 1
	}
	fmt.Fprintf(w, "\n%s in %.1f s. Next: docs/trying-it.md (your own handler, a sample event, DynamoDB Local), make test.\n", d.verdict(), time.Since(start).Seconds())
	if d.failed > 0 {
		return 1
	}
	return 0
}

// cleanup deletes the demo tables, with time of its own: the demo's context
// may have been cancelled.
func cleanup(client *dynamodb.Client, tables localddb.Tables) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := localddb.DeleteTables(ctx, client, tables); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	}
}
