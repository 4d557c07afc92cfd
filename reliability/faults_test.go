package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// charge is the input of the handlers these tests wrap; ID is the key.
type charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// receipt is their output; Run numbers the handler's executions, so a replay
// shows which execution it replays.
type receipt struct {
	ChargeID string `json:"chargeId"`
	Run      int32  `json:"run"`
}

func byID(c charge) (string, error) { return c.ID, nil }

// counter is a handler that counts its executions (the side effect).
type counter struct {
	runs atomic.Int32
	fail atomic.Bool // return errHandler instead of a receipt
}

var errHandler = errors.New("test: handler failed")

func (c *counter) handle(_ context.Context, in charge) (receipt, error) {
	n := c.runs.Add(1)
	if c.fail.Load() {
		return receipt{}, errHandler
	}
	return receipt{ChargeID: in.ID, Run: n}, nil
}

// newKey returns a key no other test uses: the test's name (in characters
// any key syntax accepts) and a unique number.
func newKey(t testing.TB) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, t.Name())
	return fmt.Sprintf("%s-%d", name, keySeq.Add(1))
}

var keySeq atomic.Int64

// TestClaimFaultsAreRetriedBySDK: a claim answered with throttling or a 5xx
// is retried by the SDK's retryer (no retry loop of ours), and the
// invocation succeeds once an attempt gets through.
func TestClaimFaultsAreRetriedBySDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for _, kind := range []faultKind{throttling, provisioned, serverError, unavailable} {
		t.Run(kind.String(), func(t *testing.T) {
			wrapped, h, seen := wrapCounter(e.store())
			e.faults.reset()
			e.faults.arm(claimOp, kind, 2)

			out, err := wrapped(ctxTimeout(t, 10*time.Second), charge{ID: newKey(t), Amount: 1})
			require.NoError(t, err)
			assert.Equal(t, int32(1), out.Run)
			assert.Equal(t, 3, e.faults.count(claimOp), "two faulted attempts, then one that got through")
			assert.Equal(t, int32(1), h.runs.Load())
			ev := seen.last(t)
			assert.Equal(t, idempotent.OutcomeExecuted, ev.Outcome)
			assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, ev.RecordID), "status"))
		})
	}
}

// TestClaimFaultsPersist: when every attempt fails, the caller gets an error
// matching idempotent.ErrStore (retryable), carrying the SDK's typed error
// and its MaxAttemptsError; the handler never runs and nothing is stored.
func TestClaimFaultsPersist(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kind        faultKind
		maxAttempts int
		as          func(error) bool
	}{
		{throttling, 0, func(err error) bool { var x *types.ThrottlingException; return errors.As(err, &x) }},
		{provisioned, 5, func(err error) bool { var x *types.ProvisionedThroughputExceededException; return errors.As(err, &x) }},
		{serverError, 0, func(err error) bool { var x *types.InternalServerError; return errors.As(err, &x) }},
		{unavailable, 2, func(err error) bool { return strings.Contains(errString(err), "StatusCode: 503") }},
	} {
		t.Run(tt.kind.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{maxAttempts: tt.maxAttempts})
			logger, logs := newLogger()
			wrapped, h, seen := wrapCounter(e.store(), idempotent.WithLogger(logger))
			e.faults.arm(claimOp, tt.kind, -1)

			in := charge{ID: newKey(t)}
			_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.ErrorIs(t, err, idempotent.ErrStore)
			assert.True(t, tt.as(err), "the SDK's error is kept: %v", err)
			var maxErr *retry.MaxAttemptsError
			require.ErrorAs(t, err, &maxErr, "the SDK's retryer gave up: %v", err)
			want := tt.maxAttempts
			if want == 0 {
				want = retry.DefaultMaxAttempts
			}
			assert.Equal(t, want, maxErr.Attempt)
			assert.Equal(t, want, e.faults.count(claimOp), "the SDK made every attempt, and nothing else did")
			assert.Zero(t, h.runs.Load(), "the handler never runs when the claim fails")
			assert.Empty(t, e.records(t), "nothing stored")
			ev := seen.last(t)
			assert.Equal(t, idempotent.OutcomeStoreError, ev.Outcome)
			assert.False(t, ev.HandlerRan)
			require.Len(t, logs.find(t, map[string]any{"outcome": "store_error", "level": "ERROR", "handler_ran": false}), 1)

			// The store recovers: the retry runs the handler once.
			e.faults.disarm()
			out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.NoError(t, err)
			assert.Equal(t, int32(1), out.Run)
		})
	}
}

// TestClaimWithSDKDefaults: the SDK's default retryer, with its own
// exponential backoff, absorbs a throttled claim with no configuration.
func TestClaimWithSDKDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{defaultRetry: true})
	wrapped, _, _ := wrapCounter(e.store())
	e.faults.arm(claimOp, provisioned, 1)
	out, err := wrapped(ctxTimeout(t, 10*time.Second), charge{ID: newKey(t)})
	require.NoError(t, err)
	assert.Equal(t, int32(1), out.Run)
	assert.Equal(t, 2, e.faults.count(claimOp))
}

// TestClaimAttemptTimeout: an attempt that hangs is cut by the HTTP client's
// timeout and retried by the SDK; the invocation succeeds, once.
func TestClaimAttemptTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
	wrapped, h, _ := wrapCounter(e.store())

	e.faults.arm(claimOp, stall, 1)
	out, err := wrapped(ctxTimeout(t, 10*time.Second), charge{ID: newKey(t)})
	require.NoError(t, err)
	assert.Equal(t, int32(1), out.Run)
	assert.Equal(t, 2, e.faults.count(claimOp))

	// Every attempt hangs: ErrStore once the SDK's attempts are spent.
	e.faults.arm(claimOp, stall, -1)
	start := time.Now()
	_, err = wrapped(ctxTimeout(t, 10*time.Second), charge{ID: newKey(t)})
	require.ErrorIs(t, err, idempotent.ErrStore)
	assert.Less(t, time.Since(start), 5*time.Second, "three attempts of 300 ms")
	assert.Equal(t, int32(1), h.runs.Load())
}

// TestClaimLostResponse: the claim reached DynamoDB but its response was
// lost; the SDK's retry finds the invocation's own record, which the lease
// token identifies (the claim condition admits it), so the claim counts and the handler runs
// exactly once.
func TestClaimLostResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
	wrapped, _, seen := wrapCounter(e.store())
	e.faults.arm(claimOp, lostResponse, 1)

	out, err := wrapped(ctxTimeout(t, 10*time.Second), charge{ID: newKey(t)})
	require.NoError(t, err)
	assert.Equal(t, int32(1), out.Run)
	assert.Equal(t, 2, e.faults.count(claimOp))
	ev := seen.last(t)
	assert.Equal(t, idempotent.OutcomeExecuted, ev.Outcome)
	assert.False(t, ev.TookOver, "its own record, not a takeover")
	assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, ev.RecordID), "status"))
}

// TestClaimOutcomeUnknown: the claim was written, its response lost, and every
// retry failed too. The caller gets ErrStore (the handler did not run), but
// the record it wrote stays INPROGRESS until its lease ends: retries get
// ErrInProgress until then, and the first one after it takes over. No side
// effect repeats; the key is only unavailable for one lease.
func TestClaimOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		releaseFails  bool
		wantHeldAfter bool
	}{
		{name: "the wrapper's fenced release frees the key", releaseFails: false, wantHeldAfter: false},
		{name: "release failing too: the lease frees the key", releaseFails: true, wantHeldAfter: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
			var clk clock
			wrapped, h, seen := wrapCounter(e.store(), leaseOptions(&clk)...)
			e.faults.arm(claimOp, lostResponse, 1)
			e.faults.arm(claimOp, serverError, -1)
			if tt.releaseFails {
				e.faults.arm("DeleteItem", serverError, -1)
			}

			in := charge{ID: newKey(t)}
			_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.ErrorIs(t, err, idempotent.ErrStore)
			assert.Zero(t, h.runs.Load())
			id := seen.last(t).RecordID
			e.faults.disarm()

			if !tt.wantHeldAfter {
				assert.Nil(t, e.record(t, id), "the lost claim was released")
				out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
				require.NoError(t, err)
				assert.Equal(t, int32(1), out.Run)
				assert.False(t, seen.last(t).TookOver)
				assert.Empty(t, e.inProgress(t))
				return
			}
			assert.Equal(t, string(storage.StatusInProgress), str(e.record(t, id), "status"), "the lost claim holds the key")
			_, err = wrapped(ctxTimeout(t, 10*time.Second), in)
			require.ErrorIs(t, err, idempotent.ErrInProgress)
			clk.advance(pastLease) // past the lost claim's lease
			out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.NoError(t, err)
			assert.Equal(t, int32(1), out.Run, "the handler runs once in all")
			assert.True(t, seen.last(t).TookOver)
			assert.Empty(t, e.inProgress(t))
		})
	}
}

// TestClaimDeadline: a claim still hanging when the invocation's deadline
// comes ends with ErrStore at the deadline; the SDK does not retry past it.
func TestClaimDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	wrapped, h, _ := wrapCounter(e.store())
	e.faults.arm(claimOp, stall, -1)

	start := time.Now()
	_, err := wrapped(ctxTimeout(t, 500*time.Millisecond), charge{ID: newKey(t)})
	require.ErrorIs(t, err, idempotent.ErrStore)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, 1, e.faults.count(claimOp), "no retry after the deadline")
	assert.Zero(t, h.runs.Load())
	assert.Empty(t, e.records(t))
}

// TestClaimCancelled: a context cancelled before or during the claim gives
// ErrStore, without running the handler and without retries.
func TestClaimCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	wrapped, h, _ := wrapCounter(e.store())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := wrapped(ctx, charge{ID: newKey(t)})
	require.ErrorIs(t, err, idempotent.ErrStore)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, e.faults.count(claimOp), "no call with a cancelled context")

	e.faults.arm(claimOp, stall, -1)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-e.faults.stalls
		cancel()
	}()
	_, err = wrapped(ctx, charge{ID: newKey(t)})
	require.ErrorIs(t, err, idempotent.ErrStore)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, e.faults.count(claimOp), "a cancelled request is not retried")
	assert.Zero(t, h.runs.Load())
	assert.Empty(t, e.records(t))
}

// TestClaimFaultsThroughAdapters: a store that stays down is a 503 problem
// with Retry-After through the API Gateway adapter and a batch item failure
// through the SQS adapter; neither runs the handler, and both succeed when
// retried after the store recovers.
func TestClaimFaultsThroughAdapters(t *testing.T) {
	t.Parallel()
	t.Run("api gateway", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		handler, runs := wrapCreatedV2(e.store())
		req := httpRequest(newKey(t), `{"amount":1}`)
		e.faults.arm(claimOp, throttling, -1)
		resp, err := handler(ctxTimeout(t, 10*time.Second), req)
		require.NoError(t, err, "the adapter never returns an error")
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "1", resp.Headers["Retry-After"])
		assert.Contains(t, resp.Body, nethttp.ProblemStoreUnavailable)
		assert.Zero(t, runs.Load())

		e.faults.disarm()
		resp, err = handler(ctxTimeout(t, 10*time.Second), req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, int32(1), runs.Load())
	})
	t.Run("sqs", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		handler, runs := wrapBatch(e.store())
		batch := events.SQSEvent{Records: []events.SQSMessage{
			{MessageId: "m1", Body: `{"id":"` + newKey(t) + `-1","amount":1}`},
			{MessageId: "m2", Body: `{"id":"` + newKey(t) + `-2","amount":2}`},
		}}
		e.faults.arm(claimOp, serverError, -1)
		resp, err := handler(ctxTimeout(t, 10*time.Second), batch)
		require.NoError(t, err)
		assert.Len(t, resp.BatchItemFailures, 2, "both messages are redelivered")
		assert.Zero(t, runs.Load())

		e.faults.disarm()
		resp, err = handler(ctxTimeout(t, 10*time.Second), batch)
		require.NoError(t, err)
		assert.Empty(t, resp.BatchItemFailures)
		assert.Equal(t, int32(2), runs.Load())
	})
}

// TestCompleteFailsThroughAdapters: when the handler succeeded but its
// completion cannot be written, the API Gateway adapter still answers with
// the handler's response (not a 503), and the SQS adapter does not report the
// message (that would re-run it for certain); the record waits for its lease.
func TestCompleteFailsThroughAdapters(t *testing.T) {
	t.Parallel()
	t.Run("api gateway", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		handler, _ := wrapCreatedV2(e.store())
		e.faults.arm("UpdateItem", unavailable, -1)
		resp, err := handler(ctxTimeout(t, 10*time.Second), httpRequest(newKey(t), `{"amount":1}`))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, "created", resp.Body)
		assert.Len(t, e.inProgress(t), 1)
	})
	t.Run("sqs", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		handler, runs := wrapBatch(e.store())
		e.faults.arm("UpdateItem", throttling, -1)
		resp, err := handler(ctxTimeout(t, 10*time.Second), events.SQSEvent{Records: []events.SQSMessage{
			{MessageId: "m1", Body: `{"id":"` + newKey(t) + `","amount":1}`},
		}})
		require.NoError(t, err)
		assert.Empty(t, resp.BatchItemFailures, "not redelivered: the handler ran")
		assert.Equal(t, int32(1), runs.Load())
		assert.Len(t, e.inProgress(t), 1)
	})
}

// httpRequest is a POST /payments-like HTTP API request with an
// Idempotency-Key and a JSON body.
func httpRequest(key, body string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RawPath: "/charges",
		Headers: map[string]string{"idempotency-key": key, "content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/charges"},
		},
		Body: body,
	}
}

// testLease is the lease of tests that move past leases (WithMaxLease), with
// a 100 ms clock-skew margin: long enough that a loaded machine does not see
// it lapse by itself while a test runs; pastLease is a clock offset past it.
const (
	testLease = 5 * time.Second
	pastLease = testLease + time.Second
)

// leaseOptions are the options of tests that move past leases: testLease, a
// 100 ms clock-skew margin and clk as the clock.
func leaseOptions(clk *clock) []idempotent.Option {
	return []idempotent.Option{idempotent.WithClock(clk.now), idempotent.WithMaxLease(testLease),
		idempotent.WithClockSkew(100 * time.Millisecond)}
}

// TestCompleteRetried: a completion answered with a 5xx, or whose response
// was lost, is retried by the SDK (a repeated completion succeeds again, as
// it is conditioned on the lease only).
func TestCompleteRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
	for _, kind := range []faultKind{serverError, throttling, lostResponse} {
		t.Run(kind.String(), func(t *testing.T) {
			wrapped, h, seen := wrapCounter(e.store())
			e.faults.reset()
			e.faults.arm("UpdateItem", kind, 1)

			in := charge{ID: newKey(t)}
			_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.NoError(t, err)
			assert.Equal(t, 2, e.faults.count("UpdateItem"))
			ev := seen.last(t)
			assert.Equal(t, idempotent.OutcomeExecuted, ev.Outcome)
			assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, ev.RecordID), "status"))
			out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.NoError(t, err)
			assert.Equal(t, receipt{ChargeID: in.ID, Run: 1}, out, "replayed")
			assert.Equal(t, int32(1), h.runs.Load())
		})
	}
}

// TestCompleteFails: the handler succeeded but its completion cannot be
// written. The caller keeps its response; the record stays INPROGRESS until
// its lease; the failure is logged at ERROR as outcome=store_error; a retry
// before the lease gets ErrInProgress and one after it takes over.
func TestCompleteFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var clk clock
	logger, logs := newLogger()
	wrapped, h, seen := wrapCounter(e.store(), append(leaseOptions(&clk), idempotent.WithLogger(logger))...)
	e.faults.arm("UpdateItem", throttling, -1)

	in := charge{ID: newKey(t), Amount: 7}
	out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err, "the caller keeps its response")
	assert.Equal(t, receipt{ChargeID: in.ID, Run: 1}, out)
	assert.Equal(t, retry.DefaultMaxAttempts, e.faults.count("UpdateItem"), "the SDK retried the completion")

	ev := seen.last(t)
	assert.Equal(t, idempotent.OutcomeStoreError, ev.Outcome)
	assert.True(t, ev.HandlerRan)
	assert.ErrorIs(t, ev.Err, idempotent.ErrStore)
	item := e.record(t, ev.RecordID)
	assert.Equal(t, string(storage.StatusInProgress), str(item, "status"), "left to its lease")
	assert.NotEmpty(t, num(item, "in_progress_expiration"))

	lines := logs.find(t, map[string]any{"level": "ERROR", "outcome": "store_error"})
	require.Len(t, lines, 1, "logs: %s", logs.String())
	line := lines[0]
	assert.Equal(t, "idempotent: store_error", line["msg"])
	assert.Equal(t, ev.RecordID, line["record_id"])
	assert.Equal(t, true, line["handler_ran"])
	assert.Contains(t, line["error"], "ThrottlingException")
	assert.NotContains(t, logs.String(), in.ID, "the raw key is never logged")

	e.faults.disarm()
	_, err = wrapped(ctxTimeout(t, 10*time.Second), in)
	require.ErrorIs(t, err, idempotent.ErrInProgress, "before the lease ends")
	assert.Equal(t, int32(1), h.runs.Load())

	clk.advance(pastLease) // past the lease and its 100 ms margin
	out, err = wrapped(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	assert.Equal(t, int32(2), out.Run, "the retry took over and ran the handler again, by design")
	assert.True(t, seen.last(t).TookOver)
	assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, ev.RecordID), "status"))
	again, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	assert.Equal(t, out, again, "the takeover's response is replayed")
	assert.Empty(t, e.inProgress(t))
}

// TestCompleteWithinDeadline: a completion that hangs is retried by the SDK
// until the invocation's deadline, not beyond it.
func TestCompleteWithinDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{attemptTimeout: 200 * time.Millisecond, maxAttempts: 100})
	wrapped, _, seen := wrapCounter(e.store())
	e.faults.arm("UpdateItem", stall, -1)

	start := time.Now()
	out, err := wrapped(ctxTimeout(t, 1500*time.Millisecond), charge{ID: newKey(t)})
	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, int32(1), out.Run)
	assert.Less(t, elapsed, 2500*time.Millisecond, "bounded by the deadline")
	assert.GreaterOrEqual(t, e.faults.count("UpdateItem"), 3, "retried meanwhile")
	assert.Equal(t, idempotent.OutcomeStoreError, seen.last(t).Outcome)
	assert.Equal(t, string(storage.StatusInProgress), str(e.record(t, seen.last(t).RecordID), "status"))
}

// TestCompleteAfterCancel: an invocation context cancelled by the time the
// handler returns does not keep the record INPROGRESS: completion has its
// own time.
func TestCompleteAfterCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var seen outcomes
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrapped := idempotent.Wrap(idempotent.New(e.store(), seen.hook()), func(context.Context, charge) (receipt, error) {
		cancel()
		return receipt{Run: 1}, nil
	}, idempotent.WithKey(byID))
	_, err := wrapped(ctx, charge{ID: newKey(t)})
	require.NoError(t, err)
	assert.Equal(t, idempotent.OutcomeExecuted, seen.last(t).Outcome)
	assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, seen.last(t).RecordID), "status"))
}

// TestReleaseRetried: a release (after a handler error) answered with a 5xx or
// whose response was lost is retried by the SDK and succeeds: a retry of the
// request runs the handler again at once.
func TestReleaseRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
	for _, kind := range []faultKind{serverError, lostResponse} {
		t.Run(kind.String(), func(t *testing.T) {
			wrapped, h, seen := wrapCounter(e.store())
			e.faults.reset()
			e.faults.arm("DeleteItem", kind, 1)

			h.fail.Store(true)
			in := charge{ID: newKey(t)}
			_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.ErrorIs(t, err, errHandler)
			assert.Equal(t, 2, e.faults.count("DeleteItem"))
			assert.Equal(t, idempotent.OutcomeHandlerError, seen.last(t).Outcome)
			assert.Nil(t, e.record(t, seen.last(t).RecordID), "released")

			h.fail.Store(false)
			out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
			require.NoError(t, err)
			assert.Equal(t, int32(2), out.Run)
		})
	}
}

// TestReleaseFails: the handler failed and its release cannot be written.
// The caller gets the handler's error; the record stays INPROGRESS until its
// lease, logged at ERROR; a retry after the lease takes over and runs.
func TestReleaseFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var clk clock
	logger, logs := newLogger()
	wrapped, h, seen := wrapCounter(e.store(), append(leaseOptions(&clk), idempotent.WithLogger(logger))...)
	e.faults.arm("DeleteItem", serverError, -1)

	h.fail.Store(true)
	in := charge{ID: newKey(t)}
	_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.ErrorIs(t, err, errHandler, "the caller gets the handler's error")
	assert.NotErrorIs(t, err, idempotent.ErrStore)
	ev := seen.last(t)
	assert.Equal(t, idempotent.OutcomeStoreError, ev.Outcome)
	assert.ErrorIs(t, ev.Err, errHandler)
	assert.ErrorIs(t, ev.Err, idempotent.ErrStore)
	assert.Equal(t, string(storage.StatusInProgress), str(e.record(t, ev.RecordID), "status"))
	require.Len(t, logs.find(t, map[string]any{"level": "ERROR", "outcome": "store_error", "handler_ran": true}), 1)

	e.faults.disarm()
	h.fail.Store(false)
	_, err = wrapped(ctxTimeout(t, 10*time.Second), in)
	require.ErrorIs(t, err, idempotent.ErrInProgress)

	clk.advance(pastLease)
	out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	assert.Equal(t, int32(2), out.Run)
	assert.True(t, seen.last(t).TookOver)
	assert.Empty(t, e.inProgress(t))
}

// TestFenceCompletion: an invocation whose lease was taken over while it ran
// cannot overwrite the new owner's record: its completion is refused
// (lease_lost, logged at ERROR), its caller still gets its own response, and
// the record keeps the new owner's response.
func TestFenceCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := e.store()
	var seenA, seenB outcomes
	var clkA, clkB clock
	loggerA, logsA := newLogger()
	entered, release := make(chan idempotent.Invocation, 1), make(chan struct{})
	slow := idempotent.Wrap(idempotent.New(store, append(leaseOptions(&clkA), seenA.hook(), idempotent.WithLogger(loggerA))...), func(ctx context.Context, in charge) (receipt, error) {
		inv, _ := idempotent.FromContext(ctx)
		entered <- inv
		<-release
		return receipt{ChargeID: in.ID, Run: 1}, nil
	}, idempotent.WithKey(byID))
	fast := idempotent.Wrap(idempotent.New(store, append(leaseOptions(&clkB), seenB.hook())...), func(_ context.Context, in charge) (receipt, error) {
		return receipt{ChargeID: in.ID, Run: 2}, nil
	}, idempotent.WithKey(byID))

	in := charge{ID: newKey(t)}
	type result struct {
		out receipt
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := slow(ctxTimeout(t, 30*time.Second), in)
		done <- result{out, err}
	}()
	invA := <-entered

	clkB.advance(pastLease) // B runs after A's lease
	out, err := fast(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	assert.Equal(t, int32(2), out.Run)
	assert.True(t, seenB.last(t).TookOver)
	before := e.record(t, invA.RecordID)

	close(release)
	resA := <-done
	require.NoError(t, resA.err, "A's caller keeps A's response")
	assert.Equal(t, int32(1), resA.out.Run)
	evA := seenA.last(t)
	assert.Equal(t, idempotent.OutcomeLeaseLost, evA.Outcome)
	assert.ErrorIs(t, evA.Err, storage.ErrLeaseLost)
	require.Len(t, logsA.find(t, map[string]any{"level": "ERROR", "outcome": "lease_lost"}), 1)

	assert.Equal(t, before, e.record(t, invA.RecordID), "A wrote nothing")
	replay, err := slow(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	assert.Equal(t, int32(2), replay.Run, "the stored response is B's")
}

// TestFenceRelease: an invocation whose lease was taken over, and whose
// handler then fails, cannot delete the new owner's record, whether that
// owner is still running or has completed.
func TestFenceRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := e.store()
	for _, ownerDone := range []bool{false, true} {
		t.Run(fmt.Sprintf("owner completed %v", ownerDone), func(t *testing.T) {
			var seenA outcomes
			var clkA, clkB clock
			entered, release := make(chan struct{}, 1), make(chan struct{})
			failing := idempotent.Wrap(idempotent.New(store, append(leaseOptions(&clkA), seenA.hook())...), func(context.Context, charge) (receipt, error) {
				entered <- struct{}{}
				<-release
				return receipt{}, errHandler
			}, idempotent.WithKey(byID))
			bEntered, bRelease := make(chan struct{}, 1), make(chan struct{})
			owner := idempotent.Wrap(idempotent.New(store, leaseOptions(&clkB)...), func(_ context.Context, in charge) (receipt, error) {
				bEntered <- struct{}{}
				<-bRelease
				return receipt{ChargeID: in.ID, Run: 2}, nil
			}, idempotent.WithKey(byID))

			in := charge{ID: newKey(t)}
			errA := make(chan error, 1)
			go func() {
				_, err := failing(ctxTimeout(t, 30*time.Second), in)
				errA <- err
			}()
			<-entered
			clkB.advance(pastLease)
			errB := make(chan error, 1)
			go func() {
				_, err := owner(ctxTimeout(t, 30*time.Second), in)
				errB <- err
			}()
			<-bEntered
			if ownerDone {
				close(bRelease)
				require.NoError(t, <-errB)
			}

			close(release)
			require.ErrorIs(t, <-errA, errHandler)
			evA := seenA.last(t)
			assert.Equal(t, idempotent.OutcomeLeaseLost, evA.Outcome)
			item := e.record(t, evA.RecordID)
			require.NotNil(t, item, "A did not delete B's record")
			if !ownerDone {
				assert.Equal(t, string(storage.StatusInProgress), str(item, "status"))
				close(bRelease)
				require.NoError(t, <-errB)
			}
			assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, evA.RecordID), "status"))
		})
	}
}

// TestFenceStoreLevel: the store's fenced writes on DynamoDB Local, called
// directly: with a stale lease, Complete and Release change nothing and
// report ErrLeaseLost.
func TestFenceStoreLevel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := dynamostore.New(e.client, e.tables.Idempotency)
	ctx := ctxTimeout(t, 10*time.Second)
	now := time.Now()
	old := storage.Record{ID: "reliability#" + newKey(t), Status: storage.StatusInProgress, ExpiresAt: now.Add(time.Hour),
		LeaseExpiresAt: now.Add(time.Second), Lease: "lease-old", Version: storage.RecordVersion}
	res, err := store.Claim(ctx, old, now)
	require.NoError(t, err)
	require.True(t, res.Claimed)

	later := now.Add(2 * time.Second)
	cur := old
	cur.Lease, cur.LeaseExpiresAt = "lease-new", later.Add(time.Minute)
	res, err = store.Claim(ctx, cur, later)
	require.NoError(t, err)
	require.True(t, res.Claimed)
	assert.True(t, res.TookOver)
	before := e.record(t, old.ID)

	stale := old
	stale.Status, stale.LeaseExpiresAt, stale.Data = storage.StatusCompleted, time.Time{}, []byte("p\"stale\"")
	require.ErrorIs(t, store.Complete(ctx, stale), storage.ErrLeaseLost)
	require.ErrorIs(t, store.Release(ctx, old.ID, old.Lease), storage.ErrLeaseLost)
	assert.Equal(t, before, e.record(t, old.ID), "the new owner's record is untouched")

	done := cur
	done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p\"new\"")
	require.NoError(t, store.Complete(ctx, done))
	require.ErrorIs(t, store.Complete(ctx, stale), storage.ErrLeaseLost)
	require.ErrorIs(t, store.Release(ctx, old.ID, old.Lease), storage.ErrLeaseLost)
	assert.Equal(t, []byte("p\"new\""), bin(e.record(t, old.ID), "data"))
}
