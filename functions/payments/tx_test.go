package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// txClient is the store's DynamoDB client; commit, when set, runs instead of
// every TransactWriteItems.
type txClient struct {
	*dynamodb.Client
	calls  atomic.Int32 // TransactWriteItems
	commit func(context.Context, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
}

func (c *txClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.calls.Add(1)
	if c.commit != nil {
		return c.commit(ctx, in)
	}
	return c.Client.TransactWriteItems(ctx, in, optFns...)
}

// deadClient is the client of a process that dies when its handler returns:
// its transaction is never sent, and nor is anything after it (not even the
// write a live process settles an unknown commit with).
type deadClient struct {
	*dynamodb.Client
	dead atomic.Bool
}

var errDied = errors.New("test: the process died")

func (c *deadClient) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.dead.Store(true)
	return nil, errDied
}

func (c *deadClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.dead.Load() {
		return nil, errDied
	}
	return c.Client.UpdateItem(ctx, in, optFns...)
}

func (c *deadClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if c.dead.Load() {
		return nil, errDied
	}
	return c.Client.DeleteItem(ctx, in, optFns...)
}

// noLedger fails the test if the function writes the ledger itself: over a
// dynamostore.Store the row goes in the completion's transaction.
type noLedger struct{ t *testing.T }

func (l noLedger) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	l.t.Error("the ledger row was written outside the transaction")
	return nil, errors.New("test: no PutItem")
}

func ledgerRows(t *testing.T, client *dynamodb.Client, table, paymentID string) []payments.LedgerItem {
	t.Helper()
	items, err := localddb.Scan[payments.LedgerItem](t.Context(), client, table)
	require.NoError(t, err)
	var out []payments.LedgerItem
	for _, it := range items {
		if it.PaymentID == paymentID {
			out = append(out, it)
		}
	}
	return out
}

// TestLedgerRowInTransaction: on DynamoDB, the ledger row commits with the
// record's completion, in one TransactWriteItems; the duplicate replays.
func TestLedgerRowInTransaction(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	tc := &txClient{Client: client}
	proc := &payments.LocalProcessor{}
	handler := payments.New(dynamostore.New(tc, tables.Idempotency), proc, noLedger{t}, tables.Payments)

	first, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.StatusCode, first.Body)
	again, err := handler(t.Context(), request(t, nil))
	require.NoError(t, err)
	assert.Equal(t, "true", again.Headers[nethttp.HeaderReplayed])
	assert.Equal(t, first.Body, again.Body)

	var p payments.Payment
	require.NoError(t, json.Unmarshal([]byte(first.Body), &p))
	rows := ledgerRows(t, client, tables.Payments, p.PaymentID)
	require.Len(t, rows, 1)
	assert.Equal(t, p, rows[0].Payment)
	assert.Regexp(t, `^ch_[a-z2-7]{26}$`, rows[0].ChargeID)
	assert.Regexp(t, `^[0-9a-f]{32}$`, rows[0].ProcessorKey)
	assert.Equal(t, int32(1), tc.calls.Load(), "one transaction: the row and the completion")
	assert.Equal(t, 1, proc.Charges())
}

// TestCrashAfterChargeResumes: the charge step is recorded, then the process
// dies before its transaction reaches DynamoDB; the retry after the lease
// takes the record over, gets the charge from the record without calling the
// processor, and commits the row: one charge, one row.
func TestCrashAfterChargeResumes(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	proc := &payments.LocalProcessor{}
	dead := &deadClient{Client: client}
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	crashed := payments.New(dynamostore.New(dead, tables.Idempotency), proc, noLedger{t}, tables.Payments, idempotent.WithClock(clock))
	restarted := payments.New(dynamostore.New(client, tables.Idempotency), proc, noLedger{t}, tables.Payments, idempotent.WithClock(clock))

	ctx, cancel := context.WithTimeout(t.Context(), e2e.PaymentsTimeout)
	defer cancel()
	first, err := crashed(ctx, request(t, nil))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, first.StatusCode, 500, "no success for a run whose writes did not commit")
	busy, err := restarted(ctx, request(t, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, busy.StatusCode, "the dead owner's lease is still live")

	offset.Store(int64(time.Minute)) // past the lease
	second, err := restarted(ctx, request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, second.StatusCode, second.Body)
	var p payments.Payment
	require.NoError(t, json.Unmarshal([]byte(second.Body), &p))
	assert.Len(t, ledgerRows(t, client, tables.Payments, p.PaymentID), 1)
	assert.Equal(t, 1, proc.Calls(), "the retry resumed after the charge step")
	assert.Equal(t, 1, proc.Charges())
}

// TestUnknownCommitResumesAtOnce is issue 34's reproduction on the payments
// sample: the completion's TransactWriteItems (the ledger row and the
// record) fails in a live process with an unknown outcome. The engine settles
// it at once (the record, which holds the charge step, is suspended): the
// client gets 503, and its retry resumes after the charge at once (no 409
// until the lease ends): one ledger row, one charge.
func TestUnknownCommitResumesAtOnce(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	proc := &payments.LocalProcessor{}
	failing := &txClient{Client: client, commit: func(context.Context, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, errors.New("test: InternalServerError, through the SDK's retries")
	}}
	handler := payments.New(dynamostore.New(failing, tables.Idempotency), proc, noLedger{t}, tables.Payments)

	ctx, cancel := context.WithTimeout(t.Context(), e2e.PaymentsTimeout)
	defer cancel()
	first, err := handler(ctx, request(t, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, first.StatusCode, first.Body)
	failing.commit = nil
	second, err := handler(ctx, request(t, nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, second.StatusCode, "the retry runs at once: %s", second.Body)
	var p payments.Payment
	require.NoError(t, json.Unmarshal([]byte(second.Body), &p))
	assert.Len(t, ledgerRows(t, client, tables.Payments, p.PaymentID), 1)
	assert.Equal(t, 1, proc.Calls(), "the retry resumed after the charge step")
	assert.Equal(t, 1, proc.Charges())
}

// gatedProcessor holds each Charge call after it charged until the test
// lets it return.
type gatedProcessor struct {
	payments.LocalProcessor
	charged chan struct{} // a call charged and waits
	release chan struct{} // let one call return
}

func (g *gatedProcessor) Charge(ctx context.Context, key string, req payments.ChargeRequest) (payments.Charge, error) {
	c, err := g.LocalProcessor.Charge(ctx, key, req)
	g.charged <- struct{}{}
	<-g.release
	return c, err
}

// TestStaleOwnerCommitsNothing: an owner whose lease was taken over while it
// was still running commits nothing (its caller gets 409, not 201); the new
// owner's row is the only one, and the processor charged once.
func TestStaleOwnerCommitsNothing(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	tables := localddbtest.Tables(t, client)
	proc := &gatedProcessor{charged: make(chan struct{}), release: make(chan struct{})}
	store := dynamostore.New(client, tables.Idempotency)
	stale := payments.New(store, proc, noLedger{t}, tables.Payments)
	later := func() time.Time { return time.Now().Add(time.Minute) }
	owner := payments.New(store, proc, noLedger{t}, tables.Payments, idempotent.WithClock(later))

	ctx, cancel := context.WithTimeout(t.Context(), e2e.PaymentsTimeout)
	defer cancel()
	type result struct {
		status int
		body   string
		err    error
	}
	run := func(h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) chan result {
		out := make(chan result, 1)
		go func() {
			resp, err := h(ctx, request(t, nil))
			out <- result{resp.StatusCode, resp.Body, err}
		}()
		return out
	}
	staleDone := run(stale)
	<-proc.charged // the stale owner charged; its lease then lapses
	ownerDone := run(owner)
	<-proc.charged             // the new owner took over and called the processor: the same charge
	proc.release <- struct{}{} // the stale owner goes on and returns
	s := <-staleDone
	require.NoError(t, s.err)
	assert.Equal(t, http.StatusConflict, s.status, "the stale owner's caller gets no success: %s", s.body)

	items, err := localddb.Scan[payments.LedgerItem](t.Context(), client, tables.Payments)
	require.NoError(t, err)
	assert.Empty(t, items, "the stale owner's row was discarded with its lease")

	proc.release <- struct{}{}
	o := <-ownerDone
	require.NoError(t, o.err)
	require.Equal(t, http.StatusCreated, o.status, o.body)
	items, err = localddb.Scan[payments.LedgerItem](t.Context(), client, tables.Payments)
	require.NoError(t, err)
	assert.Len(t, items, 1, "the new owner's row")
	assert.Equal(t, 1, proc.Charges())
}
