// Package pgstore is a storage.Store kept in a PostgreSQL table, through
// github.com/jackc/pgx/v5: the classic idempotency-key pattern, with the
// database's unique key as the final serialization point and the handler's
// own writes committed in the same transaction as its record. It passes the
// storetest conformance suite (steps and transactions included) against a
// real server, with the semantics of the DynamoDB and Redis stores.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("POSTGRES_URL")) // once, at start-up
//	store := pgstore.New(pool)
//	engine := idempotent.New(store)
//
// A Store is safe for concurrent use. It is a storage.StepStore (steps,
// suspension), a storage.TxStore (the handler's writes in the record's
// transaction, through Tx), a storage.ClaimManyStore (a batch's claims in
// one statement) and a storage.FinishManyStore (its completions, and its
// releases, in one statement each).
//
// # The table
//
// One row per record, in the table schema.sql creates (Options.Table,
// default "idempotency_records"; Store.CreateTable, Store.Schema):
//
//	id               text COLLATE "C" PRIMARY KEY  <prefix>#<sha256 hex of the key>
//	status           text NOT NULL                 INPROGRESS or COMPLETED
//	expires_at       timestamptz NOT NULL          whole seconds; expired rows count as absent
//	lease_expires_at timestamptz                   milliseconds; NULL when completed
//	lease            text NOT NULL                 the owner's random token (the fence)
//	fingerprint      text NOT NULL DEFAULT ''      the payload's hash; '' for none
//	data             bytea                         the stored response; NULL for none
//	version          integer NOT NULL              the record format version
//	step_names       text[] NOT NULL DEFAULT '{}'  the finished steps, in order
//	step_data        bytea[] NOT NULL DEFAULT '{}' their results
//	suspended        boolean NOT NULL DEFAULT false
//	trace            text                          the completing call's trace context; NULL for none
//
// and an index on expires_at, for the sweep.
//
// # One statement per operation
//
// Each operation is one SQL statement, so one round trip, which PostgreSQL
// runs atomically; one that may refuse to write returns, in the same
// answer, what refused it:
//   - Claim is INSERT … ON CONFLICT (id) DO UPDATE … WHERE <the stored record
//     may be replaced> (storage.Record.Replaceable: expired, or INPROGRESS of
//     this format with a lapsed lease and a compatible fingerprint), in a
//     statement that first locks the stored row and returns it: the live
//     record when the claim is refused (a duplicate key is never an error),
//     and what the claim replaced (a takeover, or a resume of a suspended
//     record) when it is not. A claim that resumes a record
//     (storage.Record.Resumable) keeps its steps in the same statement. A
//     new key costs 2 round trips (claim, complete); a duplicate, completed
//     or in progress, costs 1.
//   - Complete is UPDATE … WHERE id = $1 AND lease = $2, fenced on the lease
//     alone so that a retried completion succeeds again; Release is DELETE
//     … WHERE id = $1 AND lease = $2; AppendStep and Suspend update an
//     INPROGRESS record that carries the lease.
//
// "Now" is always the caller's (the engine's clock), never the server's
// now(): every store behaves identically, and tests pass any time.
// Records larger than Options.MaxItemBytes are refused with
// storage.ErrTooLarge, as on the other stores.
//
// # The handler's writes in the record's transaction
//
// Inside a handler run by an idempotent front door over this store,
// Tx(ctx) returns a pgx.Tx: the handler runs its SQL in it, and the engine
// runs the completion (UPDATE … WHERE lease = $lease) in the same
// transaction and commits it when the handler returns, or rolls it back
// when the handler fails. So the handler's writes and its record commit
// together, or not at all:
//   - an owner whose lease was taken over while it ran finds no row to
//     complete: its transaction rolls back, none of its writes commit, and
//     its caller gets idempotent.ErrInProgress (what a retry would get), not
//     a success;
//   - a write PostgreSQL refuses (a constraint, a deferred constraint at
//     COMMIT, a deadlock) commits nothing: the record is released as after a
//     handler error, and the caller's error wraps idempotent.ErrTxAborted and
//     the *pgconn.PgError.
//
// The transaction is READ COMMITTED (BeginTx says why that makes the fence
// exact). What becomes exactly-once is the handler's writes to this
// database, while the record lives; calls to other systems are not covered:
// pass idempotent.DownstreamKey to them.
//
// # Pool sizing
//
// A run that asks for Tx holds one pool connection from that call until the
// engine settles the run; the store's own statements (claim, steps,
// completion without a transaction) borrow one briefly. A handler that holds
// its transaction and then needs another connection (a step, a query on
// the pool) needs two at once. Size the pool (pgxpool's MaxConns) for the
// runs in flight: at least one per concurrent handler run that uses Tx, two
// if they also run steps, plus a few; a pool too small for that makes runs
// wait for a connection until their context ends. On AWS Lambda (one run per
// execution environment) a pool of 2 to 4 is enough; put RDS Proxy in front
// of the database for many environments.
//
// # Behind a connection pooler
//
// A Store works unchanged behind a pooler in transaction mode (PgBouncer's
// pool_mode = transaction, RDS Proxy) with the pool's default
// configuration: it sends each of its statements with
// pgx.QueryExecModeExec, in one round trip on the unnamed statement, never
// prepared by name (pgx's default mode prepares a statement on one server
// connection, and the pooler runs the next transaction on another). The
// price is that the server parses and plans each statement every time it
// runs (about 0.3 ms a statement on loopback in our measurement): a service
// that connects to PostgreSQL directly, never through such a pooler, can
// set Options.QueryExecMode to pgx.QueryExecModeCacheStatement to have
// each statement prepared once per connection instead. The handler's
// transaction (Tx) is on one server connection from BEGIN to COMMIT. The handler's own statements are its own: with pgx's defaults
// they are prepared by name and fail behind such a pooler, the second time
// they run (SQLSTATE 26000, or 42P05); pass pgx.QueryExecModeExec as their
// first argument, or set the pool's ConnConfig.DefaultQueryExecMode to it.
// Session state does not follow a connection there either (SET outside a
// transaction, advisory locks, LISTEN); the Store uses none.
//
// # Expiry
//
// PostgreSQL has no TTL. Expired records count as absent for every claim
// (expires_at < now), so correctness never depends on deleting them; the
// table's size does. Store.DeleteExpired deletes them in bounded batches:
// run it from a scheduled job, or run `idemkit sweep --postgres URL`.
//
// # Guarantees
//
// While a record lives, a duplicate never re-runs the handler, except after
// a takeover of a crashed or timed-out owner, which re-runs by design.
// Idempotent is not exactly-once; what the transaction adds is that the
// handler's writes to this database commit once, with the record that
// replays them.
package pgstore
