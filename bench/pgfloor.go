package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/internal/pgtrips"
)

// §11: the PostgreSQL store's distance from its floor, against the server
// scripts/with-postgres.sh starts on loopback. The handler is the classic
// one on PostgreSQL: it writes one ledger row. Bare, it is that INSERT and
// nothing else; wrapped, the same INSERT runs in pgstore.Tx, and the
// engine's claim and completion around it. Round trips are counted on the
// connection (internal/pgtrips, as pgstore's own tests count them).

// pgAddedP99Target is the most latency an idempotency check over PostgreSQL
// may add to an invocation at p99.
const pgAddedP99Target = 5 * time.Millisecond

// pgPath is one path of a §11 case.
type pgPath struct {
	Name    string
	Target  int // round trips per invocation; 0: none set
	Latency latencies
	Trips   []int // distinct round trips per invocation, sorted
}

func (p pgPath) ok() bool { return len(p.Trips) == 1 && p.Trips[0] == p.Target }

// pgCase is one case of §11: its paths, bare first, then wrapped (the
// INSERT in pgstore.Tx), then wrapped with a handler that runs no SQL.
type pgCase struct {
	Case  string
	Paths []pgPath
}

func (c pgCase) bare() pgPath    { return c.Paths[0] }
func (c pgCase) wrapped() pgPath { return c.Paths[1] }

// addedP99 is the latency the check adds at p99: the wrapped invocation's
// p99 less the bare handler's (µs).
func (c pgCase) addedP99() float64 { return c.wrapped().Latency.P99 - c.bare().Latency.P99 }
func (c pgCase) addedP50() float64 { return c.wrapped().Latency.P50 - c.bare().Latency.P50 }
func (c pgCase) addedOK() bool     { return c.addedP99() < float64(pgAddedP99Target.Microseconds()) }

// pgResult is what runPGFloor measured.
type pgResult struct {
	Server string // version and durability settings, for the report
	Calls  []callsResult
	Cases  []pgCase
}

// failed lists the round-trip targets missed.
func (r *pgResult) failed() []string {
	if r == nil {
		return nil
	}
	var f []string
	for _, c := range r.Calls {
		if !c.ok() {
			f = append(f, "PostgreSQL "+c.Scenario)
		}
	}
	for _, c := range r.Cases {
		for _, p := range c.Paths {
			if p.Target > 0 && !p.ok() {
				f = append(f, "PostgreSQL "+c.Case+", "+p.Name)
			}
		}
	}
	return f
}

// pgLedgerSchema is the bench handler's table: one row per payment.
const pgLedgerSchema = `(id text PRIMARY KEY, customer_id text NOT NULL, amount bigint NOT NULL, currency text NOT NULL)`

// pgBench is §11's set-up: one pool of one connection (the invocations run
// one at a time), its round trips counted, a store and a ledger table of
// the run's own.
type pgBench struct {
	pool   *pgxpool.Pool
	trips  *atomic.Int64
	store  *pgstore.Store
	ledger string
}

func newPGBench(ctx context.Context) (*pgBench, error) {
	url := os.Getenv("POSTGRES_URL")
	if url == "" {
		return nil, errors.New("POSTGRES_URL is not set: run under scripts/with-postgres.sh (make bench does)")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("POSTGRES_URL: %w", err)
	}
	cfg.MaxConns = 1
	b := &pgBench{trips: pgtrips.Count(cfg)}
	if b.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("postgres at POSTGRES_URL: %w", err)
	}
	run := randomHex(6)
	b.ledger = "idembench_ledger_" + run
	b.store = pgstore.New(b.pool, func(o *pgstore.Options) { o.Table = "idembench_records_" + run })
	if err := b.store.CreateTable(ctx); err != nil {
		b.close()
		return nil, err
	}
	if _, err := b.pool.Exec(ctx, "CREATE TABLE "+b.ledger+" "+pgLedgerSchema); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// close drops the run's tables and closes the pool.
func (b *pgBench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range []string{b.ledger, b.store.Options().Table} {
		_, _ = b.pool.Exec(ctx, `DROP TABLE IF EXISTS "`+t+`"`)
	}
	b.pool.Close()
}

// describe is the server's version and durability settings.
func (b *pgBench) describe(ctx context.Context) string {
	var version, fsync, syncCommit string
	err := b.pool.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')").
		Scan(&version, &fsync, &syncCommit)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("PostgreSQL %s, fsync %s, synchronous_commit %s", version, fsync, syncCommit)
}

// insertSQL is the handler's write, the same bare and wrapped.
func (b *pgBench) insertSQL() string {
	return "INSERT INTO " + b.ledger + " (id, customer_id, amount, currency) VALUES ($1, $2, $3, $4)"
}

// bareInsert is the handler without idempotency: its INSERT, on its own
// (autocommit: one round trip).
func (b *pgBench) bareInsert(ctx context.Context, e paymentEvent) error {
	_, err := b.pool.Exec(ctx, b.insertSQL(), "pay-"+e.IdempotencyKey, e.CustomerID, e.Amount, e.Currency)
	return err
}

// txInsert is the same handler under the wrapper: its INSERT in the
// record's transaction.
func (b *pgBench) txInsert(ctx context.Context, e paymentEvent) (paymentResult, error) {
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return paymentResult{}, err
	}
	if _, err := tx.Exec(ctx, b.insertSQL(), "pay-"+e.IdempotencyKey, e.CustomerID, e.Amount, e.Currency); err != nil {
		return paymentResult{}, err
	}
	return chargeHandler(ctx, e)
}

func (b *pgBench) engine(prefix string) *idempotent.Engine {
	return idempotent.New(b.store, idempotent.WithPrefix(prefix), idempotent.WithExpiry(time.Hour),
		idempotent.WithLogger(slog.New(slog.DiscardHandler)))
}

// runPGFloor measures §11: round trips per invocation (reps of each
// scenario), then count invocations of each path for a new key and a
// replay, interleaved in rotating order at concurrency 1, after warmup
// unmeasured ones of each.
func runPGFloor(ctx context.Context, tmpl paymentEvent, reps, count, warmup int) (*pgResult, error) {
	b, err := newPGBench(ctx)
	if err != nil {
		return nil, err
	}
	defer b.close()
	res := &pgResult{Server: b.describe(ctx)}
	run := randomHex(6)
	if res.Calls, err = b.calls(ctx, tmpl, run, reps); err != nil {
		return nil, err
	}

	withTx := idempotent.Wrap(b.engine("pgtx"), b.txInsert, idempotent.WithKey(eventKey))
	noSQL := idempotent.Wrap(b.engine("pgnosql"), chargeHandler, idempotent.WithKey(eventKey))
	bare := b.bareInsert
	wrap := func(h func(context.Context, paymentEvent) (paymentResult, error)) func(context.Context, paymentEvent) error {
		return func(ctx context.Context, e paymentEvent) error { _, err := h(ctx, e); return err }
	}
	type path struct {
		name   string
		target int
		f      func(context.Context, paymentEvent) error
		keys   []string
		lat    []time.Duration
		trips  map[int]bool
	}
	// measure runs the bare path on bk (fresh ledger rows: without the
	// check, a duplicate runs the handler again) and the wrapped ones on wk.
	measure := func(name string, targets [3]int, wk, bk []string) (pgCase, error) {
		paths := []*path{{name: "bare (the INSERT alone)", target: targets[0], f: bare, keys: bk},
			{name: "wrapped (the INSERT in pgstore.Tx)", target: targets[1], f: wrap(withTx), keys: wk},
			{name: "wrapped, a handler without SQL", target: targets[2], f: wrap(noSQL), keys: wk}}
		for _, p := range paths {
			p.trips = map[int]bool{}
		}
		for i := range wk {
			for j := range paths {
				p := paths[(i+j)%len(paths)] // rotate who goes first
				e := tmpl
				e.IdempotencyKey = p.keys[i]
				ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
				before := b.trips.Load()
				t0 := time.Now()
				err := p.f(ictx, e)
				p.lat = append(p.lat, time.Since(t0))
				p.trips[int(b.trips.Load()-before)] = true
				cancel()
				if err != nil {
					return pgCase{}, fmt.Errorf("postgres floor %s, %s: %w", name, p.name, err)
				}
			}
		}
		c := pgCase{Case: name}
		for _, p := range paths {
			c.Paths = append(c.Paths, pgPath{Name: p.name, Target: p.target, Latency: summarize(p.lat), Trips: slices.Sorted(maps.Keys(p.trips))})
		}
		return c, nil
	}
	keys := func(tag string, n int) []string {
		k := make([]string, n)
		for i := range k {
			k[i] = fmt.Sprintf("p%s-%s-%d", run, tag, i)
		}
		return k
	}
	newKey, replay := [3]int{1, 5, 2}, [3]int{1, 1, 1}
	wk := keys("warm-w", warmup)
	if _, err := measure("warm-up", newKey, wk, keys("warm-b", warmup)); err != nil {
		return nil, err
	}
	if _, err := measure("warm-up", replay, wk, keys("warm-b2", warmup)); err != nil {
		return nil, err
	}
	wk = keys("w", count)
	c, err := measure("new key", newKey, wk, keys("b", count))
	if err != nil {
		return nil, err
	}
	res.Cases = append(res.Cases, c)
	if c, err = measure("replay", replay, wk, keys("b2", count)); err != nil {
		return nil, err
	}
	res.Cases = append(res.Cases, c)
	return res, nil
}

// calls counts the round trips of reps invocations of each scenario, on the
// warm connection (a warm-up invocation of each first: pgx prepares each
// statement once per connection).
func (b *pgBench) calls(ctx context.Context, tmpl paymentEvent, run string, reps int) ([]callsResult, error) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	blocking := func(ctx context.Context, e paymentEvent) (paymentResult, error) {
		if e.Amount < 0 {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return chargeHandler(ctx, e)
	}
	h := idempotent.Wrap(b.engine("pgcalls"), blocking, idempotent.WithKey(eventKey))
	// Another process's engine: its duplicate goes to the store (in one
	// engine, a duplicate of a run in flight is answered without a call).
	other := idempotent.Wrap(b.engine("pgcalls"), blocking, idempotent.WithKey(eventKey))
	withTx := idempotent.Wrap(b.engine("pgcallstx"), b.txInsert, idempotent.WithKey(eventKey))

	ev := func(key string) paymentEvent { e := tmpl; e.IdempotencyKey = key; return e }
	// call runs f on e and returns its round trips.
	call := func(f func(context.Context, paymentEvent) (paymentResult, error), e paymentEvent) (int, error) {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		before := b.trips.Load()
		_, err := f(ictx, e)
		return int(b.trips.Load() - before), err
	}
	inProgress := func(e paymentEvent) (int, error) {
		e.Amount = -1
		done := make(chan error, 1)
		go func() { _, err := other(ctx, e); done <- err }()
		<-started
		n, err := call(h, e)
		release <- struct{}{}
		if oerr := <-done; oerr != nil {
			return n, fmt.Errorf("the owner: %w", oerr)
		}
		if !errors.Is(err, idempotent.ErrInProgress) {
			return n, fmt.Errorf("want idempotent.ErrInProgress, got %v", err)
		}
		return n, nil
	}
	scenarios := []struct {
		name, outcome string
		target        int
		run           func(key string) (int, error)
	}{
		{"new key", "executed", 2, func(k string) (int, error) { return call(h, ev(k)) }},
		{"replay", "replayed", 1, func(k string) (int, error) {
			if _, err := call(h, ev(k)); err != nil {
				return 0, err
			}
			return call(h, ev(k))
		}},
		{"in progress on another instance", "ErrInProgress", 1, func(k string) (int, error) { return inProgress(ev(k)) }},
		{"new key, one INSERT in pgstore.Tx", "executed, the row committed with the record", 5, func(k string) (int, error) {
			return call(withTx, ev(k))
		}},
	}
	var out []callsResult
	for i, sc := range scenarios {
		r := callsResult{Scenario: sc.name, Target: sc.target, Outcome: sc.outcome}
		for rep := -1; rep < reps; rep++ { // rep -1 warms the connection up
			n, err := sc.run(fmt.Sprintf("c%s-%d-%d", run, i, rep))
			if err != nil {
				r.Problem = err.Error()
				break
			}
			if rep >= 0 {
				r.Calls = append(r.Calls, n)
			}
		}
		if r.Problem == "" && sc.target == 5 {
			if err := b.ledgerHas(ctx, fmt.Sprintf("pay-c%s-%d-", run, i), reps+1); err != nil {
				r.Problem = err.Error()
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// ledgerHas checks that the ledger holds want rows whose id starts with
// prefix: the handler's writes committed.
func (b *pgBench) ledgerHas(ctx context.Context, prefix string, want int) error {
	var n int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM "+b.ledger+" WHERE starts_with(id, $1)", prefix).Scan(&n); err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("the ledger holds %d rows, want %d", n, want)
	}
	return nil
}
