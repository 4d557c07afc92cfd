package nethttp_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// events collects the core's outcome events, one per request.
type events chan idempotent.Event

// option is the outcome hook that collects them.
func (ev events) option() idempotent.Option {
	return idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) { ev <- e })
}

// next waits for the next event.
func (ev events) next(t *testing.T) idempotent.Event {
	t.Helper()
	select {
	case e := <-ev:
		return e
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no outcome event")
		return idempotent.Event{}
	}
}

// hangUp sends r with a client that gives up after timeout, and expects it
// to give up.
func hangUp(t *testing.T, client *http.Client, base string, r req, timeout time.Duration) {
	t.Helper()
	impatient := *client
	impatient.Timeout = timeout
	if r.path == "" {
		r.path = "/payments"
	}
	hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+r.path, strings.NewReader(r.body))
	require.NoError(t, err)
	hr.Header.Set(nethttp.HeaderIdempotencyKey, r.key)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := impatient.Do(hr)
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err, "the client was meant to give up first")
}

// sendAgain sends r as a client would after a failure, again while the first
// request is still settling: the outcome hook runs just before the core lets
// go of the key, so a retry sent at once may meet 409 in-progress.
func sendAgain(t *testing.T, client *http.Client, base string, r req) got {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		g := send(t, client, base, r)
		if g.status != http.StatusConflict || time.Now().After(deadline) {
			return g
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientGone: a client that hangs up while the handler runs. A handler
// that then returns having written nothing (no status, no body; headers
// set on w.Header() do not count) did not answer: the record is released
// and the retry runs the handler again, instead of replaying an empty 200.
// A handler that wrote a status or a body did answer, and that is stored.
func TestClientGone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		first func(w http.ResponseWriter, r *http.Request) // the first run, after which the client hangs up
		// what the retry gets
		wantStatus   int
		wantBody     string
		wantReplayed bool
		wantRuns     int
	}{
		{
			name:       "nothing written",
			first:      func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			wantStatus: http.StatusCreated, wantBody: "done", wantRuns: 2,
		},
		{
			name: "only headers set",
			first: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Partial", "1")
				<-r.Context().Done()
			},
			wantStatus: http.StatusCreated, wantBody: "done", wantRuns: 2,
		},
		{
			name: "status written",
			first: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				<-r.Context().Done()
			},
			wantStatus: http.StatusAccepted, wantBody: "", wantReplayed: true, wantRuns: 1,
		},
		{
			name: "body written",
			first: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte("partial"))
				<-r.Context().Done()
			},
			wantStatus: http.StatusOK, wantBody: "partial", wantReplayed: true, wantRuns: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					tc.first(w, r)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("done"))
			})
			ev := make(events, 8)
			base, client := serve(t, newEngine(idempotent.NewMemoryStore(), ev.option()), h)
			r := req{key: "gone-1", body: `{"amount":1500}`}

			hangUp(t, client, base, r, 300*time.Millisecond)
			first := ev.next(t) // the first request is settled
			if tc.wantRuns == 2 {
				assert.Equal(t, idempotent.OutcomeHandlerError, first.Outcome)
				assert.ErrorIs(t, first.Err, nethttp.ErrNoResponse)
				assert.ErrorIs(t, first.Err, context.Canceled, "the cause: the client's disconnect")
				t.Logf("%s: %v", first.Outcome, first.Err)
			} else {
				assert.Equal(t, idempotent.OutcomeExecuted, first.Outcome)
			}

			retry := sendAgain(t, client, base, r)
			require.False(t, retry.status == http.StatusOK && retry.body == "" && retry.replayed(),
				"a client that hung up was stored as an empty success")
			assert.Equal(t, tc.wantStatus, retry.status)
			assert.Equal(t, tc.wantBody, retry.body)
			assert.Equal(t, tc.wantReplayed, retry.replayed())
			assert.Empty(t, retry.header.Get("X-Partial"))
			assert.Equal(t, tc.wantRuns, int(runs.Load()))
		})
	}
}

// TestClientGoneResumesSteps: a handler whose client hangs up after its
// charge step and which returns on the context's end is a failure; the
// record, holding the step, is suspended, and the retry resumes after the
// charge.
func TestClientGoneResumesSteps(t *testing.T) {
	t.Parallel()
	var charges, attempts atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := idempotent.Step(r.Context(), "charge", func(ctx context.Context) (string, error) {
			charges.Add(1)
			return "ch_1", nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if attempts.Add(1) == 1 {
			select {
			case <-r.Context().Done():
				return // the client is gone: nothing to answer
			case <-time.After(10 * time.Second):
			}
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(id))
	})
	ev := make(events, 8)
	base, client := serve(t, newEngine(idempotent.NewMemoryStore(), ev.option()), h)
	r := req{key: "pay-gone", body: `{"amount":1500}`}

	hangUp(t, client, base, r, 300*time.Millisecond)
	first := ev.next(t)
	assert.Equal(t, idempotent.OutcomeHandlerError, first.Outcome)
	assert.ErrorIs(t, first.Err, nethttp.ErrNoResponse)

	retry := sendAgain(t, client, base, r)
	require.Equal(t, http.StatusCreated, retry.status, retry.body)
	assert.Equal(t, "ch_1", retry.body)
	assert.False(t, retry.replayed())
	assert.Equal(t, int32(1), charges.Load(), "the charge ran again")
	assert.Equal(t, int32(2), attempts.Load())

	replay := send(t, client, base, r)
	assert.True(t, replay.replayed())
	assert.Equal(t, "ch_1", replay.body)
}

// TestLeaseDeadlineWithoutResponse: the handler's context ends at the
// lease's deadline while the client still waits. A handler that returns
// then with nothing written failed: its client gets 500 internal-error, and
// the retry runs it again.
func TestLeaseDeadlineWithoutResponse(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("done"))
	})
	ev := make(events, 8)
	base, client := serve(t, newEngine(idempotent.NewMemoryStore(), ev.option(), idempotent.WithMaxLease(time.Second)), h)
	r := req{key: "slow-1", body: `{"amount":1}`}

	first := send(t, client, base, r)
	requireProblem(t, first, http.StatusInternalServerError, nethttp.ProblemInternal)
	e := ev.next(t)
	assert.Equal(t, idempotent.OutcomeHandlerError, e.Outcome)
	assert.ErrorIs(t, e.Err, nethttp.ErrNoResponse)
	assert.ErrorIs(t, e.Err, context.DeadlineExceeded)
	t.Logf("%s: %v", e.Outcome, e.Err)

	retry := sendAgain(t, client, base, r)
	assert.Equal(t, http.StatusCreated, retry.status)
	assert.Equal(t, "done", retry.body)
	assert.False(t, retry.replayed())
	assert.Equal(t, int32(2), runs.Load())
}

// TestNoWriteLiveContext: a handler that returns having written nothing
// while its context is live answered 200 with an empty body, as under
// net/http: that is stored and replayed, headers included.
func TestNoWriteLiveContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		header  string // X-Set's value in the replay
	}{
		{name: "nothing", handler: func(http.ResponseWriter, *http.Request) {}},
		{name: "only headers", header: "1", handler: func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Set", "1") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1); tc.handler(w, r) })
			ev := make(events, 8)
			base, client := serve(t, newEngine(idempotent.NewMemoryStore(), ev.option()), h)
			first := send(t, client, base, req{key: "k"})
			assert.Equal(t, http.StatusOK, first.status)
			assert.Equal(t, idempotent.OutcomeExecuted, ev.next(t).Outcome)
			again := send(t, client, base, req{key: "k"})
			assert.Equal(t, http.StatusOK, again.status)
			assert.Empty(t, again.body)
			assert.True(t, again.replayed())
			assert.Equal(t, tc.header, again.header.Get("X-Set"))
			assert.Equal(t, int32(1), runs.Load())
		})
	}
}
