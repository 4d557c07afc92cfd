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
}

func defaultOptions() Options {
	return Options{Table: DefaultTable, MaxItemBytes: storage.DefaultMaxItemBytes}
}

// normalize puts back the defaults of out-of-range values.
func (o *Options) normalize() {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.MaxItemBytes <= 0 {
		o.MaxItemBytes = storage.DefaultMaxItemBytes
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
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}
