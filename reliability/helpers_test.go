package reliability_test

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
	"github.com/idemkit/idemkit/internal/testlog"
)

// processLogs receives every record logged through slog.Default by this test
// binary: the sample functions log there, and security_test.go checks that
// no raw key or payload ever reaches it.
var processLogs = &logBuffer{}

func TestMain(m *testing.M) {
	flag.Parse()
	// These tests mostly wait: on DynamoDB Local, on SDK backoffs, on
	// timeouts they provoke. Run more of them at once than go test's default
	// of GOMAXPROCS, unless -parallel was given.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}
	slog.SetDefault(testlog.Logger(processLogs))
	code := m.Run()
	removeCrashee()
	os.Exit(code)
}

// logBuffer collects the lines of slog JSON handlers, safe for concurrent use.
type logBuffer struct{ testlog.Buffer }

// records decodes the JSON lines written so far.
func (b *logBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	return jsonLines(t, b.String())
}

// find returns the records whose attributes include every pair of match.
func (b *logBuffer) find(t testing.TB, match map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range b.records(t) {
		ok := true
		for k, v := range match {
			if r[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

func jsonLines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] != '{' {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), "log line %s", line)
		out = append(out, r)
	}
	return out
}

// newLogger returns a debug-level JSON logger writing into a fresh buffer.
func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return testlog.Logger(b), b
}

// outcomes collects the events a wrapper reports through WithOutcomeHook.
type outcomes struct {
	mu     sync.Mutex
	events []idempotent.Event
}

func (o *outcomes) hook() idempotent.Option {
	return idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.events = append(o.events, ev)
	})
}

func (o *outcomes) all() []idempotent.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]idempotent.Event(nil), o.events...)
}

func (o *outcomes) last(t testing.TB) idempotent.Event {
	t.Helper()
	all := o.all()
	require.NotEmpty(t, all, "no outcome reported")
	return all[len(all)-1]
}

// counts tallies the outcomes by name.
func (o *outcomes) counts() map[string]int {
	m := map[string]int{}
	for _, ev := range o.all() {
		m[ev.Outcome.String()]++
	}
	return m
}

// env is one test's view of DynamoDB Local: a plain client, a client whose
// transport injects faults, and the sample stack's tables under names of
// the test's own.
type env struct {
	client *dynamodb.Client // no faults; for set-up and inspection
	faults *faultyTransport
	faulty *dynamodb.Client // through faults, with fast SDK retries
	tables localddb.Tables
}

// envOptions tune newEnv.
type envOptions struct {
	maxAttempts    int           // SDK attempts per call; the SDK's default (3) when zero
	attemptTimeout time.Duration // per-attempt HTTP timeout; none when zero
	defaultRetry   bool          // keep the SDK's own retryer (backoff and all)
}

// newEnv creates the tables and clients for t. It skips t without DynamoDB
// Local (or fails it when IDEMKIT_REQUIRE_DYNAMODB=1).
func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	client := localddbtest.Client(t)
	e := &env{client: client, tables: localddbtest.Tables(t, client), faults: newFaultyTransport()}
	e.faulty = localddbtest.Client(t, func(opts *dynamodb.Options) {
		opts.HTTPClient = e.faults.client(o.attemptTimeout)
		if !o.defaultRetry {
			opts.Retryer = fastRetryer(o.maxAttempts)
		}
	})
	return e
}

// fastRetryer is the SDK's standard retryer (the same retryable errors,
// throttle detection and retry quota) with a 1 ms backoff, so tests that
// provoke retries stay fast. maxAttempts zero keeps the default of 3.
func fastRetryer(maxAttempts int) *retry.Standard {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		if maxAttempts > 0 {
			so.MaxAttempts = maxAttempts
		}
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
}

// store returns a dynamostore.Store on the idempotency table through the
// faulty client.
func (e *env) store() *dynamostore.Store { return dynamostore.New(e.faulty, e.tables.Idempotency) }

// record reads the item of a record id with a consistent read; nil if none.
func (e *env) record(t testing.TB, id string) map[string]types.AttributeValue {
	t.Helper()
	require.NotEmpty(t, id, "record id")
	consistent := true
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      &e.tables.Idempotency,
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: &consistent,
	})
	require.NoError(t, err)
	return out.Item
}

// put writes an item into the idempotency table as it is.
func (e *env) put(t testing.TB, item map[string]types.AttributeValue) {
	t.Helper()
	_, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.tables.Idempotency, Item: item})
	require.NoError(t, err)
}

// records scans the idempotency table.
func (e *env) records(t testing.TB) []map[string]types.AttributeValue {
	t.Helper()
	return scanAll(t, e.client, e.tables.Idempotency)
}

func scanAll(t testing.TB, client *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	consistent := true
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: &table, ConsistentRead: &consistent})
	var items []map[string]types.AttributeValue
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		items = append(items, page.Items...)
	}
	return items
}

// inProgress returns the ids of the INPROGRESS records in the table.
func (e *env) inProgress(t testing.TB) []string {
	t.Helper()
	var ids []string
	for _, it := range e.records(t) {
		if str(it, "status") == string(storage.StatusInProgress) {
			ids = append(ids, str(it, "id"))
		}
	}
	return ids
}

// str returns a string attribute, or "" when it is absent or not a string.
func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok && v != nil {
		return v.Value
	}
	return ""
}

// num returns a number attribute, or "" when it is absent or not a number.
func num(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok && v != nil {
		return v.Value
	}
	return ""
}

// bin returns a binary attribute, or nil.
func bin(item map[string]types.AttributeValue, name string) []byte {
	if v, ok := item[name].(*types.AttributeValueMemberB); ok && v != nil {
		return v.Value
	}
	return nil
}

// clock is a clock for idempotent.WithClock: real time plus an offset that
// the test moves, so leases lapse without sleeping.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// ctxTimeout is a context for one invocation, like Lambda's: it ends after d.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// errString is err's message, or "<nil>".
func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// wrapCounter wraps the handle method of a new counter on store, keyed by the
// charge's ID, on an engine reporting to a new outcomes, with opts after that.
func wrapCounter(store storage.Store, opts ...idempotent.Option) (func(context.Context, charge) (receipt, error), *counter, *outcomes) {
	h, seen := &counter{}, &outcomes{}
	e := idempotent.New(store, append([]idempotent.Option{seen.hook()}, opts...)...)
	return idempotent.Wrap(e, h.handle, idempotent.WithKey(byID)), h, seen
}

// wrapCreatedV2 wraps, with the API Gateway adapter on store, an HTTP API
// handler that answers 201 "created"; runs counts its executions.
func wrapCreatedV2(store storage.Store) (handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), runs *atomic.Int32) {
	runs = &atomic.Int32{}
	return apigateway.WrapV2(idempotent.New(store), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: "created"}, nil
	}), runs
}

// wrapBatch wraps, with the SQS adapter on store, a handler of charges keyed
// by their ID that succeeds; runs counts its executions.
func wrapBatch(store storage.Store) (handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), runs *atomic.Int32) {
	runs = &atomic.Int32{}
	return sqsbatch.Wrap(idempotent.New(store), func(context.Context, charge) error {
		runs.Add(1)
		return nil
	}, sqsbatch.WithKey(byID)), runs
}
