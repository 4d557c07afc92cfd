package idemkitcli_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/cmd/internal/idemkitcli"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the command in process with the clock at now.
func run(t *testing.T, now time.Time, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := &idemkitcli.Command{Stdout: &out, Stderr: &errOut, Now: func() time.Time { return now }}
	code := cmd.Run(t.Context(), args)
	return result{code, out.String(), errOut.String()}
}

// oneLine asserts stderr is a single line (no stack trace).
func oneLine(t *testing.T, r result) {
	t.Helper()
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr: %q", r.stderr)
}

func TestUsageAndHelp(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, cmd := range []string{"id", "inspect", "forget", "list", "check"} {
		r := run(t, now, cmd, "--help")
		assert.Equal(t, 0, r.code, cmd)
		assert.Contains(t, r.stdout, "Usage: idemkit "+cmd, cmd)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage:"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"unknown flag", []string{"id", "--nope"}, "flag provided but not defined"},
		{"no key", []string{"id", "--prefix", "p"}, "name the record"},
		{"no prefix", []string{"id", "--key", "k"}, "--prefix is needed"},
		{"caller with --key", []string{"id", "--prefix", "p", "--key", "k", "--caller", "jwt"}, "--caller goes with --http-key"},
		{"bad caller", []string{"id", "--prefix", "p", "--http-key", "k", "--caller", "jwt"}, "takes 2 parts"},
		{"no store", []string{"inspect", "--id", "p#x"}, "name the store"},
		{"two stores", []string{"inspect", "--id", "p#x", "--table", "t", "--redis", "redis://127.0.0.1:1"}, "only one of --table, --redis, --redis-cluster and --postgres"},
		{"list without a mode", []string{"list", "--table", "t"}, "--stuck or --in-progress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, now, tt.args...)
			assert.Equal(t, idemkitcli.ExitUsage, r.code)
			assert.Contains(t, r.stderr, tt.want)
		})
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	now := time.Now()
	r := run(t, now, "id", "--prefix", "orders", "--key", "order-1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, idempotent.RecordID("orders", "", "order-1")+"\n", r.stdout)

	r = run(t, now, "id", "--prefix", "web", "--key", "k", "--scope", "tenant-7", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"id":"`+idempotent.RecordID("web", "tenant-7", "k")+`"}`, r.stdout)

	want, err := apigateway.RecordID("payments", "k-1", "iam", "arn:aws:iam::1:user/a")
	require.NoError(t, err)
	r = run(t, now, "id", "--prefix", "payments", "--http-key", `"k-1"`, "--caller", "iam", "--caller-part", "arn:aws:iam::1:user/a")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, want+"\n", r.stdout, "the quoted and bare forms of a key are one key")
}

// layout is a DynamoDB key layout the tests run on.
type layout struct {
	name  string
	flags []string
	opts  func(*dynamostore.Options)
	spec  func(*localddb.Table)
}

var layouts = []layout{
	{"partition key", nil, func(*dynamostore.Options) {}, func(*localddb.Table) {}},
	{"composite key", []string{"--key-attr", "pk", "--sort-key-attr", "sk", "--static-partition-key", "idempotency#payments"},
		func(o *dynamostore.Options) {
			o.KeyAttr, o.SortKeyAttr, o.StaticPartitionKey = "pk", "sk", "idempotency#payments"
		},
		func(t *localddb.Table) { t.PartitionKey, t.SortKey = "pk", "sk" }},
	// Without --steps-attr, the steps of such a table would be invisible to
	// inspect and thrown away unseen by forget.
	{"custom attribute names", []string{"--steps-attr", "finished_steps", "--suspended-attr", "paused", "--lease-attr", "owner"},
		func(o *dynamostore.Options) {
			o.StepsAttr, o.SuspendedAttr, o.LeaseAttr = "finished_steps", "paused", "owner"
		},
		func(*localddb.Table) {}},
}

// composite reports whether l is the composite key layout.
func (l layout) composite() bool { return slices.Contains(l.flags, "--sort-key-attr") }

// newTable creates a table of the layout (TTL on expiration unless noTTL),
// deleted when the test ends, and a store on it.
func newTable(t *testing.T, client *dynamodb.Client, l layout, noTTL bool) (string, *dynamostore.Store) {
	t.Helper()
	spec := localddb.Table{Name: localddb.UniqueTables(t.Name()).Idempotency, PartitionKey: "id", TTLAttribute: "expiration"}
	if noTTL {
		spec.TTLAttribute = ""
	}
	l.spec(&spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, localddb.CreateTable(ctx, client, spec))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = localddb.DeleteTable(ctx, client, spec.Name)
	})
	return spec.Name, dynamostore.New(client, spec.Name, l.opts)
}

// httpResponse is an HTTP front door's stored form, as the adapters write it.
const httpResponse = `{"statusCode":201,"headers":{"Content-Type":"application/json"},"body":"{\"id\":\"pay_1\"}"}`

// seeded are the records seed writes.
type seeded struct {
	done, live, lapsed, suspended storage.Record
}

// seed writes a completed HTTP record, a live and a lapsed INPROGRESS record,
// and one suspended after a handler error, to store, at now.
func seed(t *testing.T, store storage.StepStore, now time.Time) seeded {
	t.Helper()
	ctx := t.Context()
	mk := func(key string, lease time.Duration) storage.Record {
		rec := storage.Record{ID: idempotent.RecordID("payments", "", key), Status: storage.StatusInProgress,
			ExpiresAt: now.Add(time.Hour), LeaseExpiresAt: now.Add(lease), Lease: "lease-" + key,
			Fingerprint: "fp", Version: storage.RecordVersion}
		res, err := store.Claim(ctx, rec, now)
		require.NoError(t, err)
		require.True(t, res.Claimed)
		return rec
	}
	done := mk("done", time.Minute)
	done.Status, done.Data, done.LeaseExpiresAt = storage.StatusCompleted, deflated(t, httpResponse), time.Time{}
	require.NoError(t, store.Complete(ctx, done))
	live := mk("live", 10*time.Minute)
	lapsed := mk("lapsed", 2*time.Second)
	// The lapsed owner finished a step before it crashed.
	require.NoError(t, store.AppendStep(ctx, lapsed.ID, lapsed.Lease, storage.Step{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}))
	// The suspended owner finished a step, then its handler failed.
	suspended := mk("suspended", time.Minute)
	require.NoError(t, store.AppendStep(ctx, suspended.ID, suspended.Lease, storage.Step{Name: "reserve", Data: []byte(`"r_1"`)}))
	require.NoError(t, store.Suspend(ctx, suspended.ID, suspended.Lease, now))
	return seeded{done, live, lapsed, suspended}
}

func TestDynamoDB(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			table, store := newTable(t, client, l, false)
			now := time.Now()
			recs := seed(t, store, now)
			later := now.Add(time.Minute) // the lapsed lease has ended, the live one has not
			flags := append([]string{"--table", table}, l.flags...)
			storeTests(t, flags, recs, later)

			// A corrupt item: shown with its raw attributes, never deleted.
			bad := map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "INPROGRESS"},
				"expiration": &types.AttributeValueMemberS{Value: "soon"}}
			withID := func(item map[string]types.AttributeValue, id string) map[string]types.AttributeValue {
				if l.composite() {
					item["pk"], item["sk"] = &types.AttributeValueMemberS{Value: "idempotency#payments"}, &types.AttributeValueMemberS{Value: id}
				} else {
					item["id"] = &types.AttributeValueMemberS{Value: id}
				}
				return item
			}
			_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: withID(bad, "payments#bad")})
			require.NoError(t, err)
			// A Powertools (TypeScript) record in flight on the shared table.
			_, err = client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: withID(map[string]types.AttributeValue{
				"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
				"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(later.Add(time.Hour).Unix(), 10)},
				"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(later.Add(time.Minute).UnixMilli(), 10)},
			}, powertoolsID)})
			require.NoError(t, err)
			foreignTests(t, flags, later)
			r := run(t, later, append([]string{"inspect", "--id", "payments#bad"}, flags...)...)
			assert.Equal(t, idemkitcli.ExitCorrupt, r.code)
			assert.Contains(t, r.stdout, "CORRUPT")
			assert.Contains(t, r.stdout, `expiration               S "soon"`)
			oneLine(t, r)
			r = run(t, later, append([]string{"forget", "--id", "payments#bad"}, flags...)...)
			assert.Equal(t, idemkitcli.ExitCorrupt, r.code)
			assert.Contains(t, r.stderr, "not deleting a record idemkit cannot read")
			_, err = store.Get(t.Context(), "payments#bad")
			require.ErrorIs(t, err, storage.ErrCorruptRecord, "still there")

			r = run(t, later, append([]string{"list", "--in-progress", "--limit", "0"}, flags...)...)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "CORRUPT")

			r = run(t, later, append([]string{"check"}, flags...)...)
			assert.Equal(t, 0, r.code, r.stdout+r.stderr)
			assert.Contains(t, r.stdout, "ok   TTL enabled on expiration")
			assert.Contains(t, r.stdout, `"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:GetItem"`)
		})
	}
}

// powertoolsID is the id Powertools for AWS Lambda (TypeScript) gives a
// record of the function "payments": NAME#<base64 of an MD5>.
const powertoolsID = "payments#4PhdCKDyGVs9hQPBULSSzA=="

// foreignTests runs list and forget on a store that holds a Powertools
// record (powertoolsID) and no INPROGRESS record of idemkit's.
func foreignTests(t *testing.T, flags []string, later time.Time) {
	t.Helper()
	with := func(args ...string) []string { return append(args, flags...) }
	r := run(t, later, with("list", "--in-progress", "--limit", "0")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^CORRUPT .* `+regexp.QuoteMeta(powertoolsID), r.stdout, "a foreign record cannot be read")
	r = run(t, later, with("list", "--in-progress", "--limit", "0", "--prefix", "payments")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no records found\n", r.stdout, "--prefix leaves other tools' records out")
	assert.Contains(t, r.stderr, "of other prefixes or tools left out")
	r = run(t, later, with("forget", "--id", powertoolsID, "--force")...)
	assert.Equal(t, idemkitcli.ExitCorrupt, r.code)
	assert.Contains(t, r.stderr, "not deleting a record idemkit cannot read")
}

// storeTests runs inspect, forget and list on a store seeded by seed.
func storeTests(t *testing.T, flags []string, recs seeded, later time.Time) {
	t.Helper()
	with := func(args ...string) []string { return append(args, flags...) }
	done, live, lapsed, suspended := recs.done, recs.live, recs.lapsed, recs.suspended

	// inspect by raw key, human and JSON, with the response decoded.
	r := run(t, later, with("inspect", "--prefix", "payments", "--key", "done", "--show-response")...)
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{done.ID, "status   COMPLETED", "counts until then", "fingerprint present", "version  1",
		"stored (compressed)", "HTTP 201", "Content-Type: application/json", `{"id":"pay_1"}`} {
		assert.Contains(t, r.stdout, want)
	}
	r = run(t, later, with("inspect", "--id", lapsed.ID, "--json")...)
	require.Equal(t, 0, r.code, r.stderr)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	assert.Equal(t, "INPROGRESS", v["status"])
	assert.Equal(t, true, v["leaseLapsed"])
	assert.Equal(t, false, v["expired"])
	assert.Equal(t, true, v["fingerprintPresent"])
	assert.Equal(t, []any{map[string]any{"name": "charge", "bytes": float64(13)}}, v["steps"])
	r = run(t, later, with("inspect", "--id", lapsed.ID, "--show-response")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "steps    1 finished")
	assert.Contains(t, r.stdout, `1. charge (13 bytes) {"id":"ch_1"}`)
	assert.Contains(t, r.stdout, "its owner crashed or overran")

	// Suspended after a handler error: said so, not "crashed or overran".
	r = run(t, later, with("inspect", "--id", suspended.ID)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "SUSPENDED after a handler error, its steps kept (the next retry of the same payload resumes it at once)")
	assert.Contains(t, r.stdout, "1. reserve (5 bytes)")
	assert.NotContains(t, r.stdout, "crashed or overran")

	r = run(t, later.Add(2*time.Hour), with("inspect", "--id", done.ID)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "EXPIRED", "judged by the clock: TTL would have removed it")

	r = run(t, later, with("inspect", "--prefix", "payments", "--key", "never")...)
	assert.Equal(t, idemkitcli.ExitNotFound, r.code)
	oneLine(t, r)

	// list: the lapsed one is stuck; both are in progress, lapsed first.
	r = run(t, later, with("list", "--stuck")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, lapsed.ID)
	assert.NotContains(t, r.stdout, live.ID)
	if slices.Contains(flags, "--postgres") {
		assert.Contains(t, r.stderr, "in id order") // TestPostgresSaysWhatItReads has the rest
	} else {
		assert.Contains(t, r.stderr, "reads every item")
	}
	assert.Contains(t, r.stderr, "done:")
	r = run(t, later, with("list", "--in-progress", "--json")...)
	require.Equal(t, 0, r.code, r.stderr)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	require.Len(t, listed, 3)
	assert.Equal(t, suspended.ID, listed[0]["id"], "lapsed leases first, the oldest lapse first")
	assert.Equal(t, true, listed[0]["suspended"])
	assert.Equal(t, lapsed.ID, listed[1]["id"])
	assert.Equal(t, live.ID, listed[2]["id"])
	r = run(t, later, with("list", "--in-progress", "--prefix", "payments")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^suspended .* `+suspended.ID+`$`, r.stdout)
	assert.Regexp(t, `(?m)^lapsed .* `+lapsed.ID+`$`, r.stdout)
	assert.Regexp(t, `(?m)^live .* `+live.ID+`$`, r.stdout)
	r = run(t, later, with("list", "--in-progress", "--prefix", "orders")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no records found\n", r.stdout)
	r = run(t, later, with("list", "--in-progress", "--limit", "1")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "1 listed")

	// forget: a live record only with --force; a lapsed one at once.
	r = run(t, later, with("forget", "--id", live.ID)...)
	assert.Equal(t, idemkitcli.ExitRefused, r.code)
	assert.Contains(t, r.stderr, "owner may still be running")
	oneLine(t, r)
	r = run(t, later, with("forget", "--id", live.ID, "--dry-run", "--force")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "dry run")
	r = run(t, later, with("forget", "--id", live.ID, "--force")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "WARNING")
	assert.Contains(t, r.stdout, "forgotten")
	// forget: a record holding finished steps shows them, and only with --force.
	for _, rec := range []struct {
		rec  storage.Record
		step string
	}{{lapsed, "charge"}, {suspended, "reserve"}} {
		r = run(t, later, with("forget", "--id", rec.rec.ID)...)
		assert.Equal(t, idemkitcli.ExitRefused, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "1. "+rec.step)
		assert.Contains(t, r.stderr, "holds 1 finished step(s) ("+rec.step+"): forgetting it throws them away")
		oneLine(t, r)
		r = run(t, later, with("inspect", "--id", rec.rec.ID)...)
		require.Equal(t, 0, r.code, "still there: %s", r.stderr)
	}
	r = run(t, later, with("forget", "--prefix", "payments", "--key", "lapsed", "--force")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "WARNING: throwing away 1 finished step(s) (charge)")
	r = run(t, later, with("inspect", "--id", lapsed.ID)...)
	assert.Equal(t, idemkitcli.ExitNotFound, r.code)
	r = run(t, later, with("forget", "--id", suspended.ID, "--force")...)
	require.Equal(t, 0, r.code, r.stderr)
}

// TestDynamoDBAPIGatewayRecord: a record the API Gateway adapter wrote is
// found from the raw Idempotency-Key and the caller.
func TestDynamoDBAPIGatewayRecord(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	table, store := newTable(t, client, layouts[0], false)
	h := apigateway.WrapV2(idempotent.New(store, idempotent.WithPrefix("payments")), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Location": "/payments/pay_9"}, Body: `{"id":"pay_9"}`}, nil
	})
	ev := events.APIGatewayV2HTTPRequest{RawPath: "/payments", Body: `{"amount":5}`,
		Headers: map[string]string{"idempotency-key": "order-77", "content-type": "application/json"}}
	ev.RequestContext.HTTP.Method = "POST"
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://idp.example", "sub": "alice"}}}
	out, err := h(t.Context(), ev)
	require.NoError(t, err)
	require.Equal(t, 201, out.StatusCode)

	r := run(t, time.Now(), "inspect", "--table", table, "--prefix", "payments", "--http-key", "order-77",
		"--caller", "jwt", "--caller-part", "https://idp.example", "--caller-part", "alice", "--show-response")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "status   COMPLETED")
	assert.Contains(t, r.stdout, "HTTP 201")
	assert.Contains(t, r.stdout, "Location: /payments/pay_9")
	assert.Contains(t, r.stdout, `{"id":"pay_9"}`)

	// Another caller's same key is another record.
	r = run(t, time.Now(), "inspect", "--table", table, "--prefix", "payments", "--http-key", "order-77",
		"--caller", "jwt", "--caller-part", "https://idp.example", "--caller-part", "mallory")
	assert.Equal(t, idemkitcli.ExitNotFound, r.code)
}

func TestDynamoDBCheckFindsProblems(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	table, _ := newTable(t, client, layouts[0], true)
	now := time.Now()

	r := run(t, now, "check", "--table", table)
	assert.Equal(t, idemkitcli.ExitCheck, r.code)
	assert.Contains(t, r.stdout, "FAIL TTL is not enabled")
	assert.Contains(t, r.stdout, "fix: aws dynamodb update-time-to-live --table-name "+table+
		" --time-to-live-specification Enabled=true,AttributeName=expiration")
	oneLine(t, r)

	r = run(t, now, append([]string{"check", "--table", table}, layouts[1].flags...)...)
	assert.Equal(t, idemkitcli.ExitCheck, r.code)
	assert.Contains(t, r.stdout, "FAIL key schema: the table has partition key id (S), the layout wants partition key pk (S), sort key sk (S)")

	// Wrong layout on a read: one line that says so.
	r = run(t, now, append([]string{"inspect", "--id", "p#x", "--table", table}, layouts[1].flags...)...)
	assert.Equal(t, idemkitcli.ExitFailed, r.code)
	assert.Contains(t, r.stderr, "key schema does not match the layout")
	oneLine(t, r)
}

func TestDynamoDBMissingTable(t *testing.T) {
	t.Parallel()
	localddbtest.Require(t)
	for _, args := range [][]string{{"inspect", "--id", "p#x"}, {"check"}, {"list", "--stuck"}} {
		r := run(t, time.Now(), append(args, "--table", "no-such-table-idemkit")...)
		assert.Equal(t, idemkitcli.ExitFailed, r.code, args)
		assert.Contains(t, r.stderr, "the table does not exist", args)
		assert.Contains(t, r.stderr, "idemkit: ", args)
	}
}

// TestDynamoDBNoCredentials is not parallel: it changes the environment.
func TestDynamoDBNoCredentials(t *testing.T) {
	localddbtest.Require(t)
	empty := t.TempDir() + "/none"
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	r := run(t, time.Now(), "inspect", "--id", "p#x", "--table", "t")
	assert.Equal(t, idemkitcli.ExitFailed, r.code)
	assert.Contains(t, r.stderr, "no AWS credentials")
	oneLine(t, r)
}

// redisURL returns REDIS_URL, or skips (fails under IDEMKIT_REQUIRE_REDIS=1).
func redisURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		if os.Getenv("IDEMKIT_REQUIRE_REDIS") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_REDIS=1 but REDIS_URL is not set")
		}
		t.Skip("REDIS_URL not set; run under scripts/with-redis.sh")
	}
	return url
}

func TestRedis(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	prefix := "idemkit-cmd-test:" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "") + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := client.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			client.Del(ctx, keys...)
		}
	})
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix })
	now := time.Now()
	recs := seed(t, store, now)
	flags := []string{"--redis", url, "--redis-key-prefix", prefix}
	storeTests(t, flags, recs, now.Add(time.Minute))

	// A Powertools record on the same server (under the same key prefix).
	require.NoError(t, client.HSet(t.Context(), prefix+powertoolsID, "status", "INPROGRESS",
		"expiration", now.Add(time.Hour).Unix(), "in_progress_expiration", now.Add(2*time.Minute).UnixMilli()).Err())
	require.NoError(t, client.Expire(t.Context(), prefix+powertoolsID, time.Hour).Err())
	foreignTests(t, flags, now.Add(time.Minute))

	// A foreign key: not a hash.
	require.NoError(t, client.Set(t.Context(), prefix+"payments#bad", "x", time.Hour).Err())
	r := run(t, now, append([]string{"inspect", "--id", "payments#bad"}, flags...)...)
	assert.Equal(t, idemkitcli.ExitCorrupt, r.code)
	assert.Contains(t, r.stdout, "(redis type)")

	require.NoError(t, client.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err())
	r = run(t, now, append([]string{"check"}, flags...)...)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "ok   maxmemory-policy noeviction")
}

// deflated is response as the engine stores a compressed one: the tag 'z',
// then DEFLATE (the record format; storage.Record.Response reads it).
func deflated(t *testing.T, response string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte('z')
	w, err := flate.NewWriter(&b, flate.BestSpeed)
	require.NoError(t, err)
	_, err = w.Write([]byte(response))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}
