package reliability_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// The commit of a handler's transaction (TransactWriteItems) whose outcome
// is unknown to the client is settled at once by the record's fence
// (docs/transactions.md): these tests inject the three ways the outcome can
// be unknown, on DynamoDB Local, through Wrap and both HTTP doors.

// commitFault is one way a commit's outcome is unknown to the client.
type commitFault struct {
	name  string
	first faultKind // the first attempt; every retry of the SDK's then gets serverError
	// committed: the transaction committed, so the first caller gets its
	// response and the retry replays it; else nothing committed and the
	// retry runs the handler at once.
	committed bool
	held      bool // the request is held, then sent after the settle
}

var commitFaults = []commitFault{
	{name: "NeverReached", first: serverError},
	{name: "CommittedAnswerLost", first: appliedThenError, committed: true},
	{name: "HeldAndAppliedAfterTheSettle", first: held, held: true},
}

// arm makes the next commit fail as cf says, through the SDK's retries.
func (cf commitFault) arm(e *env) {
	e.faults.reset()
	e.faults.arm("TransactWriteItems", cf.first, 1)
	e.faults.arm("TransactWriteItems", serverError, -1)
}

// afterFirst sends a held request, as a late network would, and checks
// that DynamoDB refused it: the record it is conditioned on was given back.
func (cf commitFault) afterFirst(t *testing.T, e *env) {
	t.Helper()
	e.faults.disarm()
	codes, bodies, err := e.faults.sendHeld()
	require.NoError(t, err)
	if !cf.held {
		assert.Empty(t, codes)
		return
	}
	require.Len(t, codes, 1, "the held commit")
	assert.Equal(t, http.StatusBadRequest, codes[0], "DynamoDB refuses the held commit: %s", bodies[0])
	assert.Contains(t, bodies[0], "TransactionCanceledException")
	assert.Contains(t, bodies[0], "ConditionalCheckFailed")
}

// ledgerAdd is the handler's own write: it adds 1 to the ledger item's
// count, so a write applied twice shows as 2.
func ledgerAdd(ctx context.Context, e *env, id string) error {
	tx, err := dynamostore.Transaction(ctx)
	if err != nil {
		return err
	}
	return tx.Add(types.TransactWriteItem{Update: &types.Update{
		TableName:                 &e.tables.Payments,
		Key:                       map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: id}},
		UpdateExpression:          aws.String("ADD applied :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}})
}

// applied is how many times the ledger write of id was applied.
func (e *env) applied(t testing.TB, id string) int {
	t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      &e.tables.Payments,
		Key:            map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	n, _ := strconv.Atoi(num(out.Item, "applied"))
	return n
}

func TestUnknownCommitIsSettledThroughWrap(t *testing.T) {
	t.Parallel()
	for _, cf := range commitFaults {
		t.Run(cf.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			var runs atomic.Int32
			seen := &outcomes{}
			wrapped := idempotent.Wrap(idempotent.New(e.store(), seen.hook()), func(ctx context.Context, in charge) (receipt, error) {
				n := runs.Add(1)
				return receipt{ChargeID: in.ID, Run: n}, ledgerAdd(ctx, e, in.ID)
			}, idempotent.WithKey(byID))
			in := charge{ID: newKey(t), Amount: 1}

			cf.arm(e)
			out, err := wrapped(ctxTimeout(t, 20*time.Second), in)
			if cf.committed {
				require.NoError(t, err, "the commit landed: the caller gets its response")
				assert.Equal(t, receipt{ChargeID: in.ID, Run: 1}, out)
				assert.Equal(t, idempotent.OutcomeExecuted, seen.last(t).Outcome)
			} else {
				require.ErrorIs(t, err, idempotent.ErrStore)
				assert.Contains(t, err.Error(), "settled: nothing committed")
				assert.Empty(t, e.inProgress(t), "the record was given back at once")
			}
			cf.afterFirst(t, e)

			out, err = wrapped(ctxTimeout(t, 20*time.Second), in)
			require.NoError(t, err, "the retry replays or runs at once")
			if cf.committed {
				assert.Equal(t, receipt{ChargeID: in.ID, Run: 1}, out, "a replay")
				assert.Equal(t, idempotent.OutcomeReplayed, seen.last(t).Outcome)
			} else {
				assert.Equal(t, receipt{ChargeID: in.ID, Run: 2}, out, "the handler ran again at once")
			}
			assert.Equal(t, 1, e.applied(t, in.ID), "the ledger write applied exactly once")
			t.Logf("%s: first caller %v, retry %+v, handler runs %d, ledger writes applied %d", cf.name, errString(err), out, runs.Load(), e.applied(t, in.ID))
		})
	}
}

func TestUnknownCommitIsSettledThroughAPIGateway(t *testing.T) {
	t.Parallel()
	for _, cf := range commitFaults {
		t.Run(cf.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			var runs atomic.Int32
			key := newKey(t)
			handler := apigateway.WrapV2(idempotent.New(e.store()), func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				n := runs.Add(1)
				if err := ledgerAdd(ctx, e, key); err != nil {
					return events.APIGatewayV2HTTPResponse{}, err
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: "run " + strconv.Itoa(int(n))}, nil
			})

			cf.arm(e)
			resp, err := handler(ctxTimeout(t, 20*time.Second), httpRequest(key, `{"amount":1}`))
			require.NoError(t, err, "the HTTP door never returns a Go error")
			if cf.committed {
				assert.Equal(t, http.StatusCreated, resp.StatusCode)
				assert.Equal(t, "run 1", resp.Body)
			} else {
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, resp.Body)
				assert.Contains(t, resp.Body, nethttp.ProblemStoreUnavailable)
			}
			cf.afterFirst(t, e)

			resp, err = handler(ctxTimeout(t, 20*time.Second), httpRequest(key, `{"amount":1}`))
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode, "never a 409 for the length of a lease: %s", resp.Body)
			if cf.committed {
				assert.Equal(t, "run 1", resp.Body)
				assert.Equal(t, "true", resp.Headers[nethttp.HeaderReplayed])
			} else {
				assert.Equal(t, "run 2", resp.Body)
			}
			assert.Equal(t, 1, e.applied(t, key), "the ledger write applied exactly once")
		})
	}
}

func TestUnknownCommitIsSettledThroughNetHTTP(t *testing.T) {
	t.Parallel()
	for _, cf := range commitFaults {
		t.Run(cf.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			var runs atomic.Int32
			key := newKey(t)
			srv := httptest.NewServer(nethttp.Middleware(idempotent.New(e.store()))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				if err := ledgerAdd(r.Context(), e, key); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("run " + strconv.Itoa(int(n))))
			})))
			t.Cleanup(srv.Close)
			post := func() (int, string, http.Header) {
				req, err := http.NewRequestWithContext(ctxTimeout(t, 20*time.Second), http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":1}`))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := srv.Client().Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(b), resp.Header
			}

			cf.arm(e)
			status, body, _ := post()
			if cf.committed {
				assert.Equal(t, http.StatusCreated, status)
				assert.Equal(t, "run 1", body)
			} else {
				assert.Equal(t, http.StatusServiceUnavailable, status, body)
				assert.Contains(t, body, nethttp.ProblemStoreUnavailable)
			}
			cf.afterFirst(t, e)

			status, body, header := post()
			assert.Equal(t, http.StatusCreated, status, "never a 409 for the length of a lease: %s", body)
			if cf.committed {
				assert.Equal(t, "run 1", body)
				assert.Equal(t, "true", header.Get(nethttp.HeaderReplayed))
			} else {
				assert.Equal(t, "run 2", body)
			}
			assert.Equal(t, 1, e.applied(t, key), "the ledger write applied exactly once")
		})
	}
}

// TestUnknownCommitWithStepsIsSettledBySuspend: a run that finished a step
// is settled by Suspend, which keeps the step: the retry resumes after it
// (the step's side effect does not repeat), and a commit held until after
// the settle finds the suspended record and commits nothing.
func TestUnknownCommitWithStepsIsSettledBySuspend(t *testing.T) {
	t.Parallel()
	for _, cf := range commitFaults {
		t.Run(cf.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			var runs, stepRuns atomic.Int32
			wrapped := idempotent.Wrap(idempotent.New(e.store()), func(ctx context.Context, in charge) (receipt, error) {
				n := runs.Add(1)
				if _, err := idempotent.Step(ctx, "charge", func(context.Context) (int32, error) { return stepRuns.Add(1), nil }); err != nil {
					return receipt{}, err
				}
				return receipt{ChargeID: in.ID, Run: n}, ledgerAdd(ctx, e, in.ID)
			}, idempotent.WithKey(byID))
			in := charge{ID: newKey(t), Amount: 1}

			cf.arm(e)
			_, err := wrapped(ctxTimeout(t, 20*time.Second), in)
			if cf.committed {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, idempotent.ErrStore)
			}
			cf.afterFirst(t, e)
			_, err = wrapped(ctxTimeout(t, 20*time.Second), in)
			require.NoError(t, err)
			assert.Equal(t, int32(1), stepRuns.Load(), "the step ran once")
			assert.Equal(t, 1, e.applied(t, in.ID), "the ledger write applied exactly once")
		})
	}
}

// TestRefusedTransaction: DynamoDB refusing the transaction's request as a
// whole is a configuration error, answered as one: the record is released at
// once, Wrap returns a *dynamostore.TxRefusedError wrapping ErrTxRefused
// (not ErrStore), and the HTTP doors answer 500 transaction-refused without
// Retry-After.
func TestRefusedTransaction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault faultKind // injected; 0: the request itself is refused by DynamoDB Local
		item  func(e *env, id string) types.TransactWriteItem
		code  string
	}{
		{"ResourceNotFound", 0, func(_ *env, id string) types.TransactWriteItem {
			return types.TransactWriteItem{Put: &types.Put{TableName: aws.String("no-such-table"),
				Item: map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: id}}}}
		}, "ResourceNotFoundException"},
		{"Validation", 0, func(e *env, id string) types.TransactWriteItem {
			return types.TransactWriteItem{Update: &types.Update{TableName: &e.tables.Payments,
				Key:              map[string]types.AttributeValue{"paymentId": &types.AttributeValueMemberS{Value: id}},
				UpdateExpression: aws.String("SET applied = :undefined")}}
		}, "ValidationException"},
		{"AccessDenied", accessDenied, nil, "AccessDeniedException"},
		{"UnknownOperation", unknownOperation, nil, "UnknownOperationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			if tc.fault != 0 {
				e.faults.arm("TransactWriteItems", tc.fault, -1)
			}
			add := func(ctx context.Context, id string) error {
				if tc.item == nil {
					return ledgerAdd(ctx, e, id)
				}
				tx, err := dynamostore.Transaction(ctx)
				if err != nil {
					return err
				}
				return tx.Add(tc.item(e, id))
			}
			var runs atomic.Int32
			wrapped := idempotent.Wrap(idempotent.New(e.store()), func(ctx context.Context, in charge) (receipt, error) {
				runs.Add(1)
				return receipt{ChargeID: in.ID}, add(ctx, in.ID)
			}, idempotent.WithKey(byID))
			in := charge{ID: newKey(t)}
			_, err := wrapped(ctxTimeout(t, 20*time.Second), in)
			require.ErrorIs(t, err, idempotent.ErrTxRefused)
			require.NotErrorIs(t, err, idempotent.ErrStore, "a configuration error is not an outage")
			var refused *dynamostore.TxRefusedError
			require.ErrorAs(t, err, &refused)
			assert.Equal(t, tc.code, refused.Code)
			assert.Empty(t, e.inProgress(t), "released at once")
			_, err = wrapped(ctxTimeout(t, 20*time.Second), in)
			require.ErrorIs(t, err, idempotent.ErrTxRefused, "the retry runs at once, and is refused the same way")
			assert.Equal(t, int32(2), runs.Load())
			assert.Equal(t, 0, e.applied(t, in.ID))

			key := newKey(t)
			handler := apigateway.WrapV2(idempotent.New(e.store()), func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				if err := add(ctx, key); err != nil {
					return events.APIGatewayV2HTTPResponse{}, err
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated}, nil
			})
			resp, err := handler(ctxTimeout(t, 20*time.Second), httpRequest(key, `{"amount":1}`))
			require.NoError(t, err)
			assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, resp.Body)
			var problem struct{ Type string }
			require.NoError(t, json.Unmarshal([]byte(resp.Body), &problem))
			assert.Equal(t, nethttp.ProblemTxRefused, problem.Type)
			assert.Empty(t, resp.Headers["Retry-After"], "not an outage: no Retry-After")
			assert.Empty(t, e.inProgress(t), "released at once")
		})
	}
}
