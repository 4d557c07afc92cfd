package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestDemo runs the whole demo against the local DynamoDB: it must tell
// its story without a single unexpected step, quickly, and leave no table
// behind.
func TestDemo(t *testing.T) {
	client := localddbtest.Client(t)
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	before := tableNames(t, client)

	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	status := run(ctx, &out, false)
	t.Log("\n" + out.String())
	require.Equal(t, 0, status)
	assert.Less(t, time.Since(start), 30*time.Second)

	text := out.String()
	assert.NotContains(t, text, "unexpected")
	assert.Equal(t, len(storySteps), numberedSteps(t, text), "the story runs the steps of storySteps, each once, in order")
	for _, want := range []string{
		"Every step turned out as expected",
		"replayed (Idempotent-Replayed: true)",
		"422 payload-mismatch",
		"400 missing-key",
		"batchItemFailures: 3e7c9f4b, 4f8d0a5c",
		"SKU-RED-MUG   3",
		"driven by a real http.Client",
		"4× 409 in-progress (Retry-After: 1)",
		"$ idemkit inspect --table", // the final scene: the new-payment step's record through the idemkit command
		"status   COMPLETED",
		"HTTP 201",
		// The stream scene (receipts.go): the checkpoint, then a clean redelivery.
		`response {"batchItemFailures":[{"itemIdentifier":"4421584500000000017450539091"}]}`,
		`redelivered from B: B, A refunded, C      → response {"batchItemFailures":[]}`,
		"receipts sent: A 1, B 1, C 1",
		"crash after the charge, before completing → 503; retry: 409 in-progress",
		"executed: took over",
		"a slow owner, its lease taken over        → 409 in-progress",
		"SKU-GOLD-PEN ×2, 1 in stock               → batchItemFailures: 9d2c7e41",
	} {
		assert.Contains(t, text, want)
	}
	// What is not self-evident is explained where it is printed: the
	// crash-after-charge step's crash (and why it counts as store_error), its
	// moved clock, the stale-owner step's fencing, and each outcome of the
	// summary that needs a reason.
	for _, want := range []string{
		"the crash is simulated", "reports store_error (a real crash reports nothing)",
		"retry, clock moved 1 minute on", "(idempotent.WithClock), past the dead owner's lease",
		"a fenced writer", "fails the lease check (lease_lost)",
		fmt.Sprintf("step %d's key, amount 9900, not 2500", stepNumber("web-new")),
		"executed     includes " + refs("invalid-bodies") + "'s 400s",
		"in_progress  " + refs("concurrent-duplicates", "crash-after-charge", "web-concurrent") + ": duplicates while the key's owner ran",
		"store_error  " + refs("crash-after-charge") + ": the simulated crash",
		"lease_lost   " + refs("stale-owner") + ": a fenced writer",
		"handler_error " + refs("out-of-stock") + ": the handler's writes did not commit",
		"rejected     " + refs("missing-key", "malformed-json", "orders-batch", "orders-redelivery", "web-missing-key") + ": refused before any claim",
		fmt.Sprintf("Step %d's record through the idemkit command", stepNumber("new-payment")),
	} {
		assert.Contains(t, text, want, "the demo explains itself")
	}
	for o := range outcomeReasons {
		if o != idempotent.OutcomeLeaseLost && o != idempotent.OutcomeHandlerError { // the story has none of these
			assert.Contains(t, text, "  "+o.String()+" ", "the summary explains %s", o)
		}
	}
	assert.ElementsMatch(t, before, tableNames(t, client), "the demo deletes its tables")
}

// TestWebScene runs the net/http scene alone and checks what the client got
// back and what the ledger holds.
func TestWebScene(t *testing.T) {
	client := localddbtest.Client(t)
	d := newDemo(io.Discard, client, localddbtest.Tables(t, client))
	require.NoError(t, d.webStory(t.Context()))
	assert.Zero(t, d.failed, "no step turned out unexpectedly")

	a := d.web.answers
	assert.Equal(t, 201, a["new"].status)
	assert.False(t, a["new"].replayed)
	assert.Equal(t, 201, a["retry"].status)
	assert.True(t, a["retry"].replayed, "Idempotent-Replayed: true")
	assert.Equal(t, a["new"].body, a["retry"].body, "the same body")
	assert.NotEmpty(t, a["new"].payment.PaymentID)

	assert.Equal(t, 201, a["first"].status)
	assert.False(t, a["first"].replayed)
	for i := range concurrent - 1 {
		dup := a[fmt.Sprint("duplicate", i)]
		assert.Equal(t, 409, dup.status, "duplicate %d", i)
		assert.Equal(t, "in-progress", dup.problem, "duplicate %d", i)
		assert.Equal(t, "1", dup.retry, "duplicate %d: Retry-After", i)
	}
	assert.Equal(t, 201, a["after409"].status)
	assert.True(t, a["after409"].replayed)
	assert.Equal(t, a["first"].payment.PaymentID, a["after409"].payment.PaymentID)

	assert.Equal(t, 422, a["differentBody"].status)
	assert.Equal(t, "payload-mismatch", a["differentBody"].problem)
	assert.Equal(t, 400, a["missingKey"].status)
	assert.Equal(t, "missing-key", a["missingKey"].problem)

	assert.Equal(t, map[string]int{"new": 1, "concurrent": 1}, d.web.added, "one ledger item per key")
	ledger, err := localddb.Scan[payments.LedgerItem](t.Context(), client, d.tables.Payments)
	require.NoError(t, err)
	var ids []string
	for _, it := range ledger {
		ids = append(ids, it.PaymentID)
	}
	assert.ElementsMatch(t, []string{a["new"].payment.PaymentID, a["first"].payment.PaymentID}, ids)
}

// TestTransactionScenes runs the three transaction scenes alone: a crash
// after the charge resumes without charging again, a stale owner's ledger row
// is discarded with its lease, a failed stock condition commits nothing.
func TestTransactionScenes(t *testing.T) {
	client := localddbtest.Client(t)
	var out bytes.Buffer
	d := newDemo(&out, client, localddbtest.Tables(t, client))
	for _, scene := range []struct {
		name string
		run  func(context.Context) error
	}{{"crash-after-charge", d.crashAfterCharge}, {"stale-owner", d.staleOwner}, {"out-of-stock", d.outOfStock}} {
		d.begin(scene.name)
		require.NoError(t, scene.run(t.Context()))
	}
	t.Log("\n" + out.String())
	assert.Zero(t, d.failed, "no scene turned out unexpectedly")
	assert.Equal(t, 2, d.processor.Charges(), "one charge per payment, crash and takeover included")
	ledger, err := localddb.Scan[payments.LedgerItem](t.Context(), client, d.tables.Payments)
	require.NoError(t, err)
	assert.Len(t, ledger, 2, "one row per payment")
	for _, why := range []string{"why: the charge step was answered from the record", "why: its commit was fenced on its lease", "why: stock >= :qty failed"} {
		assert.Contains(t, out.String(), why)
	}
}

func tableNames(t *testing.T, client *dynamodb.Client) []string {
	t.Helper()
	out, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	var names []string
	for _, n := range out.TableNames {
		if strings.HasPrefix(n, "idemkit-demo") {
			names = append(names, n)
		}
	}
	return names
}

// TestNoEndpoint is not parallel: it changes the environment.
func TestNoEndpoint(t *testing.T) {
	t.Setenv(localddb.EnvEndpoint, "")
	var out bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), &out, false))
	assert.Empty(t, out.String())
}

// TestReceiptsScene runs the stream scene alone: the first delivery's
// response names B (its send failed), the redelivery from B fails nothing,
// every payment got one receipt, and the records done were replayed.
func TestReceiptsScene(t *testing.T) {
	client := localddbtest.Client(t)
	var out bytes.Buffer
	d := newDemo(&out, client, localddbtest.Tables(t, client))
	require.NoError(t, d.receiptsStory(t.Context()))
	t.Log("\n" + out.String())
	assert.Zero(t, d.failed, "no step turned out unexpectedly")

	r := d.receipts
	require.Len(t, r.responses, 2)
	assert.Equal(t, []events.DynamoDBBatchItemFailure{{ItemIdentifier: "4421584500000000017450539091"}}, r.responses[0].BatchItemFailures)
	assert.Empty(t, r.responses[1].BatchItemFailures)
	for _, p := range []string{"A", "B", "C"} {
		assert.Equal(t, 1, r.sent(p), "payment %s", p)
	}
	assert.EqualValues(t, 4, r.calls.Load(), "A, B (failed), C, then B again: C was not re-run")
	assert.Zero(t, r.mailer.Deduplicated(), "nothing reached the mailer twice")

	text := out.String()
	for _, want := range []string{
		"handler_error the mailer failed: entry given back, and the checkpoint",
		"(C)  replayed      done in the first delivery",
		"(A)  replayed      keyed by payment, a duplicate of A",
	} {
		assert.Contains(t, text, want)
	}
}

// refs formats the numbers of the named steps as the demo's summary does:
// "step N", or "steps N, M, ...".
func refs(names ...string) string {
	var nums []string
	for _, name := range names {
		nums = append(nums, fmt.Sprint(stepNumber(name)))
	}
	if len(nums) == 1 {
		return "step " + nums[0]
	}
	return "steps " + strings.Join(nums, ", ")
}

// stepLineRE matches the first line of a step in the demo's output: its
// number, right-aligned in 3 columns, what was sent, an arrow, what came back.
var stepLineRE = regexp.MustCompile(`^ {0,2}(\d+)  \S.* → `)

// numberedSteps returns how many steps the output numbers, and fails the test
// unless they are numbered 1, 2, 3, ... in order, each once.
func numberedSteps(t *testing.T, out string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		m := stepLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		if m[1] != fmt.Sprint(n) {
			t.Errorf("step %d is numbered %s: %q", n, m[1], line)
		}
	}
	return n
}
