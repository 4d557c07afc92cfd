package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
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

// settleAnswer is what a front door answered one call, in the terms the
// settle tests compare: a success and its body, a replay, or the store's
// retryable failure (ErrStore; over HTTP 503 store-unavailable).
type settleAnswer struct {
	ok          bool
	body        string
	replayed    bool
	unavailable bool
	detail      string // for messages
}

// settleDoor builds a front door over store whose handler adds the ledger
// write of key and answers "run N"; it returns a function making one call.
type settleDoor struct {
	name  string
	build func(t *testing.T, e *env, runs *atomic.Int32, key string) func() settleAnswer
}

var settleDoors = []settleDoor{
	{"Wrap", func(t *testing.T, e *env, runs *atomic.Int32, key string) func() settleAnswer {
		seen := &outcomes{}
		wrapped := idempotent.Wrap(idempotent.New(e.store(), seen.hook()), func(ctx context.Context, in charge) (string, error) {
			n := runs.Add(1)
			return "run " + strconv.Itoa(int(n)), ledgerAdd(ctx, e, in.ID)
		}, idempotent.WithKey(byID))
		return func() settleAnswer {
			out, err := wrapped(ctxTimeout(t, 20*time.Second), charge{ID: key, Amount: 1})
			return settleAnswer{ok: err == nil, body: out, replayed: err == nil && seen.last(t).Outcome == idempotent.OutcomeReplayed,
				unavailable: errors.Is(err, idempotent.ErrStore) && strings.Contains(err.Error(), "settled: nothing committed"), detail: errString(err)}
		}
	}},
	{"APIGateway", func(t *testing.T, e *env, runs *atomic.Int32, key string) func() settleAnswer {
		handler := apigateway.WrapV2(idempotent.New(e.store()), func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			n := runs.Add(1)
			if err := ledgerAdd(ctx, e, key); err != nil {
				return events.APIGatewayV2HTTPResponse{}, err
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: "run " + strconv.Itoa(int(n))}, nil
		})
		return func() settleAnswer {
			resp, err := handler(ctxTimeout(t, 20*time.Second), httpRequest(key, `{"amount":1}`))
			require.NoError(t, err, "the HTTP door never returns a Go error")
			return httpAnswer(resp.StatusCode, resp.Body, resp.Headers[nethttp.HeaderReplayed])
		}
	}},
	{"NetHTTP", func(t *testing.T, e *env, runs *atomic.Int32, key string) func() settleAnswer {
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
		return func() settleAnswer {
			req, err := http.NewRequestWithContext(ctxTimeout(t, 20*time.Second), http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":1}`))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return httpAnswer(resp.StatusCode, string(b), resp.Header.Get(nethttp.HeaderReplayed))
		}
	}},
}

// httpAnswer reads an HTTP door's answer: 201 is the handler's, 503
// store-unavailable the store's.
func httpAnswer(status int, body, replayed string) settleAnswer {
	return settleAnswer{ok: status == http.StatusCreated, body: body, replayed: replayed == "true",
		unavailable: status == http.StatusServiceUnavailable && strings.Contains(body, nethttp.ProblemStoreUnavailable),
		detail:      strconv.Itoa(status) + " " + body}
}

// TestUnknownCommitIsSettled: through every front door, each way of an
// unknown commit ends with the caller getting its response exactly when the
// commit landed (else the store's retryable failure), the retry replaying it
// or running the handler at once (never a 409 for the length of a lease),
// and the ledger write applied exactly once.
func TestUnknownCommitIsSettled(t *testing.T) {
	t.Parallel()
	for _, door := range settleDoors {
		for _, cf := range commitFaults {
			t.Run(door.name+"/"+cf.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, envOptions{})
				var runs atomic.Int32
				key := newKey(t)
				call := door.build(t, e, &runs, key)

				cf.arm(e)
				first := call()
				if cf.committed {
					assert.True(t, first.ok && first.body == "run 1", "the commit landed: the caller gets its response, got %s", first.detail)
				} else {
					assert.True(t, first.unavailable, "nothing committed: the store's retryable failure, got %s", first.detail)
					assert.Empty(t, e.inProgress(t), "the record was given back at once")
				}
				cf.afterFirst(t, e)

				retry := call()
				require.True(t, retry.ok, "the retry replays or runs at once: got %s", retry.detail)
				if cf.committed {
					assert.Equal(t, "run 1", retry.body)
					assert.True(t, retry.replayed, "a replay")
				} else {
					assert.Equal(t, "run 2", retry.body, "the handler ran again at once")
				}
				assert.Equal(t, 1, e.applied(t, key), "the ledger write applied exactly once")
				t.Logf("first caller: %s; retry: %s (replayed %v); handler runs %d; ledger writes applied %d",
					first.detail, retry.detail, retry.replayed, runs.Load(), e.applied(t, key))
			})
		}
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
