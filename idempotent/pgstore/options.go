package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// DefaultTable is the default Options.Table.
const DefaultTable = "idempotency_records"

// Options configures a Store. New sets the defaults documented on each field
// and then applies its option functions, as the AWS SDK's constructors do.
type Options struct {
	// Schema is the schema of the table; "" (the default) leaves it to the
	// connection's search_path.
	Schema string

	// Table is the table that holds the records (schema.sql's columns).
	// Default DefaultTable. Names are quoted as given: no SQL is ever built
	// from them otherwise.
	Table string

	// MaxItemBytes is the largest record Complete, Tx.Commit and AppendStep
	// write, counted as the byte lengths of its text and bytea values (id,
	// status, lease, fingerprint, data, each step's name and result) plus
	// 21 for its timestamps, version and flag; a larger one yields an error
	// wrapping storage.ErrTooLarge, and nothing is written. PostgreSQL
	// itself holds far larger rows: the default, storage.DefaultMaxItemBytes
	// (DynamoDB's 400 KB), keeps the engine's behaviour the same on every
	// store, and a record's size bounded. Zero or less means the default.
	MaxItemBytes int

	// QueryExecMode is how the store sends its own statements: pgx's
	// choice, passed as the first argument of each, so that it holds for
	// them alone, whatever the pool's DefaultQueryExecMode. The default,
	// pgx.QueryExecModeExec, sends each unnamed, in one round trip, and
	// works behind a pooler in transaction mode (PgBouncer, RDS Proxy) as
	// on a direct connection; the server then parses and plans each
	// statement every time it runs.
	//
	// On a direct connection only, pgx.QueryExecModeCacheStatement (pgx's
	// default) prepares each statement by name once per connection, and the
	// server reuses what it parsed and planned: about 0.3 ms less server
	// time per statement (a claim, a completion) on loopback in our
	// measurement, and one more round trip the first time each statement
	// runs on a connection. Behind a transaction pooler it fails (SQLSTATE
	// 26000 or 42P05). Every mode of pgx's works; a value pgx does not
	// define means the default.
	QueryExecMode pgx.QueryExecMode

	// ScanPageSize is the number of rows each query of Scan returns at
	// most; zero or less means 1,000.
	ScanPageSize int
}

func defaultOptions() Options {
	return Options{Table: DefaultTable, MaxItemBytes: storage.DefaultMaxItemBytes, QueryExecMode: defaultExecMode, ScanPageSize: 1000}
}

// normalize puts back the defaults of out-of-range values.
func (o *Options) normalize() {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.MaxItemBytes <= 0 {
		o.MaxItemBytes = storage.DefaultMaxItemBytes
	}
	if o.ScanPageSize <= 0 {
		o.ScanPageSize = 1000
	}
	switch o.QueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
	default:
		o.QueryExecMode = defaultExecMode
	}
}

// qualifiedTable is the table's quoted name, schema-qualified when Schema is set.
func (o *Options) qualifiedTable() string {
	if o.Schema == "" {
		return quoteIdent(o.Table)
	}
	return quoteIdent(o.Schema) + "." + quoteIdent(o.Table)
}

// DB is the part of pgx a Store uses. *pgxpool.Pool satisfies it (and is
// what a service should pass: a Store is used by many goroutines at once);
// so does *pgx.Conn, for a program that runs one invocation at a time.
//
// The Store passes Options.QueryExecMode (pgx.QueryExecModeExec by default)
// as the first argument of each of its statements (pgx's per-statement
// choice of how to send it), so that it works with the pool's default
// configuration behind a pooler in transaction mode too; a DB that wraps
// pgx must pass the arguments on as they are, and the same goes for the
// pgx.Tx its BeginTx returns.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}
