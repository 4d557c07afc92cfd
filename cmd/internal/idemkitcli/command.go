package idemkitcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
)

// Exit statuses of Run; see the package documentation.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitUsage    = 2
	ExitNotFound = 3
	ExitCorrupt  = 4
	ExitRefused  = 5
	ExitCheck    = 6
)

// Command is one run of the idemkit command.
type Command struct {
	// Stdout receives the answer, Stderr errors, warnings and progress.
	Stdout, Stderr io.Writer
	// Now is the clock leases and expiries are judged by; nil means time.Now.
	Now func() time.Time

	// testStore, when set, is the store every command uses instead of the
	// one its flags name: the seam for tests of the commands' own logic.
	testStore records
}

// open connects to the store s names (or returns testStore).
func (c *Command) open(ctx context.Context, s *storeFlags) (records, error) {
	if c.testStore != nil {
		return c.testStore, nil
	}
	return s.open(ctx)
}

func (c *Command) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// usage is the top-level help.
const usage = `idemkit: find, inspect and safely clear idempotency records, and check a table.

Usage:
  idemkit id       KEY FLAGS                    print the record id of a key
  idemkit inspect  (--id ID | KEY FLAGS) STORE  show a record (--show-response, --json)
  idemkit forget   (--id ID | KEY FLAGS) STORE  delete a record so its key runs again (conditional; --force for
                                                a live one, or one holding finished steps)
  idemkit list     --stuck | --in-progress STORE [--prefix P]
                                                list INPROGRESS records (of prefix P), lapsed leases first
                                                (on DynamoDB a Scan: costs reads)
  idemkit check    STORE                        verify a table, server or cluster before use, with the fix for
                                                each problem
  idemkit sweep    --postgres URL               delete expired records from a PostgreSQL table, in batches
                                                (PostgreSQL has no TTL: run it from a scheduled job)

KEY FLAGS name a record by its raw key, as the wrapper and the adapters derive its id:
  --prefix P --key K [--scope S]                       idempotent.Wrap, sqsbatch, nethttp (S: WithScope's value)
  --prefix P --http-key HEADER --caller KIND [--caller-part X]...   the API Gateway adapter
  P is the function's name (AWS_LAMBDA_FUNCTION_NAME) unless it sets idempotent.WithPrefix; off Lambda
  (that variable unset) it is "idemkit". K is the raw key itself: for nethttp, the header's key without
  its quotes. HEADER is the Idempotency-Key value as the client sent it, quotes included if any
  (Idempotency-Key: "a b" is --http-key '"a b"' in the shell); the adapter scopes it to the caller, so
  --key never finds an API Gateway record.
STORE: --table NAME (DynamoDB, with the dynamostore layout flags), --redis URL (one server; a cluster
node's URL stands for its cluster), --redis-cluster host:port,host:port,... (a Redis Cluster; also
go-redis's cluster URL redis://host:port?addr=host2:port2&addr=...) or --postgres URL (a PostgreSQL
table: --postgres-table, default idempotency_records).
Run "idemkit COMMAND --help" for a command's flags. Exit statuses: 0 done, 1 failed, 2 usage,
3 no such record, 4 corrupt or foreign record, 5 forget refused, 6 check found problems.
`

// Run runs the command with args (without the program name) and returns the
// exit status. Errors are written to Stderr in one line.
func (c *Command) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.Stderr, usage)
		return ExitUsage
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.Stdout, usage)
		return ExitOK
	case "id":
		err = c.id(args[1:])
	case "inspect":
		err = c.inspect(ctx, args[1:])
	case "forget":
		err = c.forget(ctx, args[1:])
	case "list":
		err = c.list(ctx, args[1:])
	case "check":
		err = c.check(ctx, args[1:])
	case "sweep":
		err = c.sweep(ctx, args[1:])
	default:
		fmt.Fprintf(c.Stderr, "idemkit: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
	return c.exit(err)
}

// exitError carries an exit status other than ExitFailed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func (c *Command) exit(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ee) && ee.err == nil:
		return ee.code // already reported
	case errors.Is(err, errUsage):
		fmt.Fprintf(c.Stderr, "idemkit: %s\n", strings.TrimPrefix(err.Error(), "usage: "))
		return ExitUsage
	case errors.As(err, &ee):
		fmt.Fprintf(c.Stderr, "idemkit: %v\n", ee.err)
		return ee.code
	}
	fmt.Fprintf(c.Stderr, "idemkit: %v\n", err)
	return ExitFailed
}

// newFlags returns a flag set for a command that reports errors to Stderr
// and prints help (with the command's summary) to Stdout.
func (c *Command) newFlags(name, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet("idemkit "+name, flag.ContinueOnError)
	fs.SetOutput(c.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: idemkit %s\n\n", summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, printing help to Stdout for --help.
func (c *Command) parse(fs *flag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fs.SetOutput(c.Stdout)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	if err := fs.Parse(args); err != nil {
		return &exitError{code: ExitUsage} // the flag package has said why
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// keyFlags name a record: by id, or by its raw key.
type keyFlags struct {
	id, prefix, key, scope, httpKey, caller string
	callerParts                             []string
}

func (k *keyFlags) register(fs *flag.FlagSet, byID bool) {
	if byID {
		fs.StringVar(&k.id, "id", "", "the record `id` (prefix#sha256), as logged in record_id")
	}
	fs.StringVar(&k.prefix, "prefix", "", "the key `prefix`: idempotent.WithPrefix, by default the function's name (AWS_LAMBDA_FUNCTION_NAME), \"idemkit\" off Lambda")
	fs.StringVar(&k.key, "key", "", "the raw idempotency `key` (idempotent.Wrap's WithKey, sqsbatch, nethttp: the header's key without its quotes)")
	fs.StringVar(&k.scope, "scope", "", "the key's `scope` (idempotent.WithScope or nethttp.WithScope; empty by default)")
	fs.StringVar(&k.httpKey, "http-key", "", "the Idempotency-Key `header` value as sent to the API Gateway adapter, quotes included if any ('\"a b\"' in the shell); with --caller")
	fs.StringVar(&k.caller, "caller", "", "the API Gateway caller `kind`: jwt, jwt-client, lambda, lambda-context, cognito, iam, iam-caller, apikey or anonymous")
	fs.Func("caller-part", "one `part` of the caller, in order (repeat): jwt: issuer, subject; iam: user ARN; lambda: principalId; "+
		"lambda-context: field, JSON value; cognito: pool id, identity id; iam-caller: account, caller id; apikey: key id",
		func(s string) error { k.callerParts = append(k.callerParts, s); return nil })
}

// recordID derives the id the flags name.
func (k *keyFlags) recordID() (string, error) {
	named := 0
	for _, set := range []bool{k.id != "", k.key != "", k.httpKey != ""} {
		if set {
			named++
		}
	}
	switch {
	case named == 0:
		return "", fmt.Errorf("%w: name the record: --id ID, --prefix P --key K, or --prefix P --http-key H --caller KIND", errUsage)
	case named > 1:
		return "", fmt.Errorf("%w: give one of --id, --key and --http-key", errUsage)
	case k.id != "":
		if k.prefix != "" || k.scope != "" || k.caller != "" {
			return "", fmt.Errorf("%w: --id names the record already: drop --prefix, --scope and --caller", errUsage)
		}
		return k.id, nil
	case k.prefix == "":
		return "", fmt.Errorf("%w: --prefix is needed to derive the id (the function's name, unless the function sets idempotent.WithPrefix; \"idemkit\" off Lambda)", errUsage)
	case k.key != "":
		if k.caller != "" || len(k.callerParts) > 0 {
			return "", fmt.Errorf("%w: --caller goes with --http-key; with --key, give the scope itself as --scope", errUsage)
		}
		return idempotent.RecordID(k.prefix, k.scope, k.key), nil
	}
	if k.scope != "" {
		return "", fmt.Errorf("%w: with --http-key the scope is the caller: use --caller and --caller-part, not --scope", errUsage)
	}
	if k.caller == "" {
		return "", fmt.Errorf("%w: --http-key needs --caller (anonymous when the API has no authorizer)", errUsage)
	}
	id, err := apigateway.RecordID(k.prefix, k.httpKey, k.caller, k.callerParts...)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errUsage, err)
	}
	return id, nil
}

func (c *Command) id(args []string) error {
	fs := c.newFlags("id", "id KEY FLAGS\n\nPrints the record id of a raw key, exactly as the wrapper and the adapters derive it.")
	var k keyFlags
	k.register(fs, false)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	id, err := k.recordID()
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(c.Stdout, map[string]string{"id": id})
	}
	fmt.Fprintln(c.Stdout, id)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
