package idemkitcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/idempotent/pgstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// pgFlags select a PostgreSQL table (package pgstore).
type pgFlags struct {
	url   string
	table string // [schema.]table
}

func (p *pgFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.url, "postgres", "", "a PostgreSQL connection `URL` (postgres://user:password@host:port/db?sslmode=..., or a libpq key=value string; "+
		"PG* environment variables fill in what it leaves out), instead of --table")
	fs.StringVar(&p.table, "postgres-table", pgstore.DefaultTable, "the records' `table` (pgstore Options.Table), schema-qualified as SCHEMA.TABLE if needed")
}

// pgRecords is a PostgreSQL table.
type pgRecords struct {
	*pgstore.Store
	pool  *pgxpool.Pool
	where string // host:port/database, for messages
}

func (p *pgRecords) name() string {
	o := p.Options()
	table := o.Table
	if o.Schema != "" {
		table = o.Schema + "." + table
	}
	return fmt.Sprintf("PostgreSQL table %s (%s)", table, p.where)
}

// What list reads on PostgreSQL: pgstore.Store.Scan's queries, which return
// the rows of one status alone (the server reads the others to find them),
// not a Scan of every item, billed by the item.

func (p *pgRecords) listStart(opts storage.ScanOptions) string {
	what := "every row of the table"
	if opts.IDPrefix != "" {
		what = fmt.Sprintf("every row whose id starts with %q (that range of the primary key)", opts.IDPrefix)
	}
	return fmt.Sprintf("reading the %s rows of %s in id order, %d per query: the server reads %s to find them, "+
		"and sends only those", opts.Status, p.name(), p.Options().ScanPageSize, what)
}

func (p *pgRecords) listPage(sp storage.ScanProgress) string {
	return fmt.Sprintf("query %d: %d INPROGRESS rows so far", sp.Pages, sp.Matched)
}

func (p *pgRecords) listDone(sp storage.ScanProgress) string {
	return fmt.Sprintf("%d INPROGRESS rows in %d %s", sp.Matched, sp.Pages, map[bool]string{true: "query", false: "queries"}[sp.Pages == 1])
}

// PostgreSQL has no TTL: an expired row stays until a sweep deletes it.

func (p *pgRecords) expiredFate() string {
	return "it stays in the table until a sweep deletes it (PostgreSQL has no TTL: `idemkit sweep`, or pgstore's Store.DeleteExpired)"
}

func (p *pgRecords) goneReasons() string {
	return "never written, released after a failure, forgotten, or deleted by a sweep after it expired"
}

func (p *pgRecords) close() error {
	p.pool.Close()
	return nil
}

// openPostgres connects to the table the flags name.
func (p *pgFlags) open(ctx context.Context) (records, error) {
	cfg, err := pgxpool.ParseConfig(p.url)
	if err != nil {
		return nil, fmt.Errorf("%w: --postgres: %w", errUsage, err)
	}
	cfg.MaxConns = 2
	schema, table := "", p.table
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	if table == "" {
		return nil, fmt.Errorf("%w: --postgres-table: no table name", errUsage)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: --postgres: %w", errUsage, err)
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	r := &pgRecords{Store: pgstore.New(pool, func(o *pgstore.Options) { o.Schema, o.Table = schema, table }), pool: pool, where: where}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, storeError(r, err)
	}
	return r, nil
}

// pgError turns a PostgreSQL error into a line that says what to do.
func pgError(r records, err error) (error, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil, false
	}
	switch pgErr.Code {
	case "42P01": // undefined_table
		return fmt.Errorf("%s: the table does not exist (create it with pgstore's Store.CreateTable or schema.sql; check --postgres-table)", r.name()), true
	case "42703": // undefined_column
		return fmt.Errorf("%s: the table's columns do not match pgstore's schema (%s): run `idemkit check` with the same flags", r.name(), pgErr.Message), true
	case "28P01", "28000":
		return fmt.Errorf("%s: authentication failed (%s): check the user and password in --postgres", r.name(), pgErr.Message), true
	}
	return fmt.Errorf("%s: %s (SQLSTATE %s)", r.name(), pgErr.Message, pgErr.Code), true
}

// pgColumns are schema.sql's columns and their types, as information_schema
// names them.
var pgColumns = []struct{ name, typ string }{
	{"id", "text"}, {"status", "text"}, {"expires_at", "timestamp with time zone"},
	{"lease_expires_at", "timestamp with time zone"}, {"lease", "text"}, {"fingerprint", "text"}, {"data", "bytea"},
	{"version", "integer"}, {"step_names", "ARRAY"}, {"step_data", "ARRAY"}, {"suspended", "boolean"},
	{"trace", "text"},
}

// checkPostgres runs its queries with pgx.QueryExecModeExec, as pgstore
// runs its own: one round trip each, nothing prepared by name, so that they
// work behind a pooler in transaction mode (PgBouncer, RDS Proxy) too.
func checkPostgres(ctx context.Context, p *pgRecords, now time.Time) ([]finding, error) {
	o := p.Options()
	var fs []finding
	var version string
	if err := p.pool.QueryRow(ctx, `SHOW server_version`, pgx.QueryExecModeExec).Scan(&version); err != nil {
		return nil, storeError(p, err)
	}
	fs = append(fs, finding{ok: true, what: "PostgreSQL " + version})

	// The table's columns.
	schemaCond := `table_schema = current_schema()`
	args := []any{pgx.QueryExecModeExec, o.Table}
	if o.Schema != "" {
		schemaCond, args = `table_schema = $2`, append(args, o.Schema)
	}
	rows, err := p.pool.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1 AND `+schemaCond, args...)
	if err != nil {
		return nil, storeError(p, err)
	}
	have := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return nil, storeError(p, err)
		}
		have[name] = typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, storeError(p, err)
	}
	create := "create it: pgstore's Store.CreateTable, or `psql -f idempotent/pgstore/schema.sql` (with your table's name)"
	if len(have) == 0 {
		return append(fs, finding{problem: true, what: "the table does not exist (or this user cannot see it)", fix: create}), nil
	}
	var wrong []string
	for _, c := range pgColumns {
		if have[c.name] != c.typ {
			got := have[c.name]
			if got == "" {
				got = "missing"
			}
			wrong = append(wrong, fmt.Sprintf("%s (%s, want %s)", c.name, got, c.typ))
		}
	}
	if len(wrong) > 0 {
		fs = append(fs, finding{problem: true, what: "columns that do not match pgstore's schema: " + strings.Join(wrong, ", "),
			fix: "alter them to schema.sql's types, or " + create})
	} else {
		fs = append(fs, finding{ok: true, what: fmt.Sprintf("columns: the %d of schema.sql, with their types", len(pgColumns))})
	}

	// The primary key on id, and the sweep's index on expires_at.
	var pk, expIdx bool
	err = p.pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
			WHERE i.indrelid = $1::regclass AND i.indisprimary AND i.indnatts = 1 AND a.attname = 'id'),
		EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND a.attname = 'expires_at')`, pgx.QueryExecModeExec, tableRegclass(o)).Scan(&pk, &expIdx)
	if err != nil {
		return nil, storeError(p, err)
	}
	if pk {
		fs = append(fs, finding{ok: true, what: "primary key (id): the claim's ON CONFLICT target"})
	} else {
		fs = append(fs, finding{problem: true, what: "no primary key on id alone: claims fail (ON CONFLICT (id) needs a unique index on id)",
			fix: "ALTER TABLE … ADD PRIMARY KEY (id)"})
	}
	if expIdx {
		fs = append(fs, finding{ok: true, what: "an index on expires_at, for the sweep"})
	} else {
		fs = append(fs, finding{what: "no index on expires_at: each sweep reads the whole table",
			fix: "CREATE INDEX ON … (expires_at)"})
	}

	// Expired rows waiting for the sweep.
	var expired int64
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM `+pgx.Identifier(identParts(o)).Sanitize()+
		` WHERE expires_at < $1 LIMIT 100001) AS e`, pgx.QueryExecModeExec, time.Unix(now.Unix(), 0)).Scan(&expired); err != nil {
		return nil, storeError(p, err)
	}
	what := fmt.Sprintf("%d expired records (they count as absent; only the table's size suffers)", expired)
	if expired > 100000 {
		what = "more than 100,000 expired records (they count as absent; only the table's size suffers)"
	}
	fs = append(fs, finding{what: what,
		fix: "PostgreSQL has no TTL: schedule `idemkit sweep` with these flags (or pgstore's Store.DeleteExpired) to delete expired records"})
	return fs, nil
}

// identParts is the table's name as pgx.Identifier parts.
func identParts(o pgstore.Options) []string {
	if o.Schema == "" {
		return []string{o.Table}
	}
	return []string{o.Schema, o.Table}
}

// tableRegclass is the table's name as a regclass literal reads it.
func tableRegclass(o pgstore.Options) string { return pgx.Identifier(identParts(o)).Sanitize() }

// sweep deletes expired records from a PostgreSQL table.
func (c *Command) sweep(ctx context.Context, args []string) error {
	fs := c.newFlags("sweep", "sweep --postgres URL [--postgres-table T] [--batch N] [--timeout D]\n\n"+
		"Deletes the records that expired (they count as absent already) from a PostgreSQL table, the oldest\n"+
		"first, in batches of --batch rows (pgstore's Store.DeleteExpired), until none is left or --timeout ends:\n"+
		"PostgreSQL has no TTL, so run it from a scheduled job. DynamoDB's TTL and Redis's key expiry delete\n"+
		"expired records themselves.")
	var s storeFlags
	s.register(fs)
	var batch int
	var timeout time.Duration
	fs.IntVar(&batch, "batch", 1000, "rows per DELETE statement (each its own short transaction)")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "stop after this long (what was deleted stays deleted; run again to go on)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if s.pg.url == "" && c.testStore == nil {
		return fmt.Errorf("%w: sweep is for PostgreSQL (--postgres URL): DynamoDB's TTL and Redis's key expiry delete expired records themselves", errUsage)
	}
	if batch <= 0 {
		return fmt.Errorf("%w: --batch must be positive", errUsage)
	}
	r, err := c.open(ctx, &s)
	if err != nil {
		return err
	}
	defer func() { _ = r.close() }()
	p, ok := r.(*pgRecords)
	if !ok {
		return fmt.Errorf("%w: sweep is for PostgreSQL (--postgres URL)", errUsage)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	now := c.now()
	n, err := p.DeleteExpired(ctx, now, batch)
	fmt.Fprintf(c.Stdout, "deleted %d expired records (expired before %s)\n", n, now.UTC().Format(time.RFC3339))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: stopped after --timeout %v with expired records left: run sweep again", r.name(), timeout)
		}
		return storeError(r, err)
	}
	return nil
}
