package nethttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/testlog"
)

func TestNewKeyThenReplay(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.Header().Set("X-Volatile", fmt.Sprint(n))
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"run":%d}`, n)
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h, nethttp.WithVolatileHeaders("x-volatile"))
	r := req{key: "k-1", body: `{"amount":1}`}

	first := send(t, client, base, r)
	require.Equal(t, http.StatusCreated, first.status)
	assert.Equal(t, `{"run":1}`, first.body)
	assert.False(t, first.replayed())
	assert.Equal(t, "session=secret", first.header.Get("Set-Cookie"), "the first client gets its response unchanged")
	assert.Equal(t, "1", first.header.Get("X-Volatile"))

	again := send(t, client, base, r)
	require.Equal(t, http.StatusCreated, again.status)
	assert.Equal(t, `{"run":1}`, again.body)
	assert.True(t, again.replayed())
	assert.Equal(t, "application/json", again.header.Get("Content-Type"))
	assert.Equal(t, []string{"a", "b"}, again.header.Values("X-Multi"))
	for _, h := range []string{"Set-Cookie", "X-Volatile", "X-Hop"} {
		assert.Empty(t, again.header.Get(h), h)
	}
	assert.NotEqual(t, "Mon, 02 Jan 2006 15:04:05 GMT", again.header.Get("Date"), "Date is the server's own")
	assert.Equal(t, int32(1), runs.Load())
}

func TestReplayCookies(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "a", Value: "1"})
		http.SetCookie(w, &http.Cookie{Name: "b", Value: "2"})
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h, nethttp.WithReplayCookies())
	send(t, client, base, req{key: "k"})
	again := send(t, client, base, req{key: "k"})
	assert.True(t, again.replayed())
	assert.Equal(t, []string{"a=1", "b=2"}, again.header.Values("Set-Cookie"))
}

// TestRequests covers the answers decided from the request: a duplicate
// must repeat method, path, query and body (JSON canonically), and a key is
// required and well formed.
func TestRequests(t *testing.T) {
	t.Parallel()
	first := req{path: "/payments?b=2&a=1", key: "k", body: `{"amount":1,"currency":"EUR"}`}
	tests := []struct {
		name    string
		second  req
		status  int
		problem string // "" for a replay
	}{
		{name: "same request", second: first, status: http.StatusCreated},
		{name: "JSON reordered and spaced", second: req{path: "/payments?a=1&b=2", key: `"k"`, body: `{ "currency":"EUR", "amount":1 }`}, status: http.StatusCreated},
		{name: "other body", second: req{path: first.path, key: "k", body: `{"amount":2,"currency":"EUR"}`}, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch},
		{name: "big numbers stay distinct", second: req{path: first.path, key: "k", body: `{"amount":1.0,"currency":"EUR"}`}, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch},
		{name: "other path", second: req{path: "/refunds?b=2&a=1", key: "k", body: first.body}, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch},
		{name: "other query", second: req{path: "/payments?a=1", key: "k", body: first.body}, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch},
		{name: "other method", second: req{method: http.MethodPatch, path: first.path, key: "k", body: first.body}, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch},
		{name: "text body compared exactly", second: req{path: first.path, key: "k", body: `{"amount":1,"currency":"EUR"}`, ctype: "text/plain"}, status: http.StatusUnprocessableEntity, problem: nethttp.ProblemPayloadMismatch},
		{name: "missing key", second: req{path: first.path, body: first.body}, status: http.StatusBadRequest, problem: nethttp.ProblemMissingKey},
		{name: "malformed key: comma", second: req{path: first.path, key: "a,b", body: first.body}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
		{name: "malformed key: too long", second: req{path: first.path, key: strings.Repeat("k", nethttp.MaxKeyLength+1), body: first.body}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
		{name: "malformed key: bad quoting", second: req{path: first.path, key: `"k`, body: first.body}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidKey},
		{name: "invalid JSON", second: req{path: first.path, key: "k2", body: `{"amount":`}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidJSON},
		{name: "duplicate JSON key", second: req{path: first.path, key: "k2", body: `{"a":1,"a":2}`}, status: http.StatusBadRequest, problem: nethttp.ProblemInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &counter{}
			base, client := serve(t, newEngine(idempotent.NewMemoryStore()), c)
			require.Equal(t, http.StatusCreated, send(t, client, base, first).status)
			g := send(t, client, base, tt.second)
			if tt.problem != "" {
				requireProblem(t, g, tt.status, tt.problem)
			} else {
				require.Equal(t, tt.status, g.status)
				assert.True(t, g.replayed())
			}
			assert.Equal(t, 1, c.count(), "a duplicate never runs the handler")
		})
	}
}

func TestMethods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   []nethttp.Option
		core   []idempotent.Option
		method string
		key    string
		want   int // status; the handler answers 201
	}{
		{name: "GET needs no key", method: http.MethodGet, want: http.StatusCreated},
		{name: "PUT needs no key by default", method: http.MethodPut, want: http.StatusCreated},
		{name: "PATCH needs a key", method: http.MethodPatch, want: http.StatusBadRequest},
		{name: "WithMethods PUT", opts: []nethttp.Option{nethttp.WithMethods("put")}, method: http.MethodPut, want: http.StatusBadRequest},
		{name: "WithMethods replaces POST", opts: []nethttp.Option{nethttp.WithMethods("PUT")}, method: http.MethodPost, want: http.StatusCreated},
		{name: "WithOptionalKey without key", core: []idempotent.Option{idempotent.WithOptionalKey()}, method: http.MethodPost, want: http.StatusCreated},
		{name: "WithOptionalKey with malformed key", core: []idempotent.Option{idempotent.WithOptionalKey()}, method: http.MethodPost, key: "a b", want: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &counter{}
			base, client := serve(t, newEngine(idempotent.NewMemoryStore(), tt.core...), c, tt.opts...)
			for range 2 {
				g := send(t, client, base, req{method: tt.method, key: tt.key, body: `{}`})
				require.Equal(t, tt.want, g.status, g.body)
				assert.False(t, g.replayed())
			}
			if tt.want == http.StatusCreated {
				assert.Equal(t, 2, c.count(), "without idempotency the handler runs every time")
			}
		})
	}
}

func TestConcurrentDuplicate(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		close(started)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h, nethttp.WithRetryAfter(1500*time.Millisecond))
	r := req{key: "k", body: `{}`}

	firstDone := make(chan got)
	go func() { firstDone <- send(t, client, base, r) }()
	<-started

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := send(t, client, base, r)
			requireProblem(t, g, http.StatusConflict, nethttp.ProblemInProgress)
			assert.Equal(t, "2", g.header.Get("Retry-After"), "whole seconds, rounded up")
		}()
	}
	wg.Wait()
	close(release)
	first := <-firstDone
	assert.Equal(t, "done", first.body)

	again := send(t, client, base, r)
	assert.Equal(t, "done", again.body)
	assert.True(t, again.replayed())
	assert.Equal(t, int32(1), runs.Load())
}

// TestStatusesNotStored: 5xx and the transient 408, 409, 425 and 429 release
// the record, so the retry runs the handler again; others are stored.
func TestStatusesNotStored(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		stored bool
	}{
		{http.StatusOK, true}, {http.StatusNoContent, true}, {http.StatusFound, true}, {http.StatusBadRequest, true},
		{http.StatusNotFound, true}, {http.StatusUnprocessableEntity, true},
		{http.StatusRequestTimeout, false}, {http.StatusConflict, false}, {http.StatusTooEarly, false},
		{http.StatusTooManyRequests, false}, {http.StatusInternalServerError, false}, {http.StatusBadGateway, false},
		{http.StatusServiceUnavailable, false},
	} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", "/x")
				w.WriteHeader(tt.status)
				_, _ = fmt.Fprintf(w, "run %d", runs.Add(1))
			})
			base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
			first := send(t, client, base, req{key: "k"})
			require.Equal(t, tt.status, first.status)
			second := send(t, client, base, req{key: "k"})
			require.Equal(t, tt.status, second.status)
			assert.Equal(t, tt.stored, second.replayed())
			if tt.stored {
				assert.Equal(t, first.body, second.body)
				assert.Equal(t, int32(1), runs.Load())
			} else {
				assert.Equal(t, int32(2), runs.Load(), "the retry runs again")
			}
		})
	}
}

func TestPanic(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			w.Header().Set("X-Partial", "1")
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
			_, _ = io.WriteString(w, "partial")
			panic(errors.New("boom"))
		}
		_, _ = io.WriteString(w, "ok")
	})
	var logs testlog.Buffer
	base, client := serve(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))), h)
	first := send(t, client, base, req{key: "k"})
	requireProblem(t, first, http.StatusInternalServerError, nethttp.ProblemInternal)
	assert.Empty(t, first.header.Get("X-Partial"), "the problem carries none of the failed handler's headers")
	assert.Empty(t, first.header.Values("Set-Cookie"))
	assert.Contains(t, logs.String(), "nethttp: handler failed")
	assert.Contains(t, logs.String(), "boom")
	assert.NotContains(t, logs.String(), `"k"`, "no raw key in the logs")

	g := send(t, client, base, req{key: "k"})
	assert.Equal(t, "ok", g.body, "the record was released: the retry runs")
	assert.False(t, g.replayed())
}

func TestAbortHandler(t *testing.T) {
	t.Parallel()
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprint("flush=", flush), func(t *testing.T) {
			t.Parallel()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "partial")
				if flush {
					w.(http.Flusher).Flush()
					panic("boom after the response began") // aborts, as net/http does
				}
				panic(http.ErrAbortHandler)
			})
			base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
			hr, err := http.NewRequest(http.MethodPost, base+"/p", nil)
			require.NoError(t, err)
			hr.Header.Set("Idempotency-Key", "k")
			resp, err := client.Do(hr)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			require.Error(t, err, "the client sees an aborted response, never a cut-off one as whole")
		})
	}
}

// TestResponseBodyLimit: a body up to WithMaxBody is stored; past it, the
// response passes through whole, the record is completed without it, and a
// duplicate gets 409 response-not-stored without running the handler.
func TestResponseBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	for _, tt := range []struct {
		name   string
		size   int
		stored bool
	}{
		{"at the limit", limit, true},
		{"one past the limit", limit + 1, false},
		{"far past the limit", 50 * limit, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			body := bytes.Repeat([]byte("0123456789"), tt.size/10+1)[:tt.size]
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Type", "application/octet-stream")
				for rest := body; len(rest) > 0; { // in chunks, as a copy would
					n := min(len(rest), 300)
					_, err := w.Write(rest[:n])
					require.NoError(t, err)
					rest = rest[n:]
				}
			})
			base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h, nethttp.WithMaxBody(limit))
			first := send(t, client, base, req{key: "k"})
			require.Equal(t, http.StatusOK, first.status)
			assert.Equal(t, string(body), first.body, "the first client always gets the whole response")
			second := send(t, client, base, req{key: "k"})
			if tt.stored {
				assert.True(t, second.replayed())
				assert.Equal(t, string(body), second.body)
			} else {
				requireProblem(t, second, http.StatusConflict, nethttp.ProblemResponseNotStored)
				assert.Empty(t, second.header.Get("Retry-After"))
			}
			assert.Equal(t, int32(1), runs.Load())
		})
	}
}

func TestResponseTooLargeForStore(t *testing.T) {
	t.Parallel()
	store := smallStore{StepStore: idempotent.NewMemoryStore(), max: 10_000}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(randomBytes(t, 40_000)) // incompressible: below WithMaxBody, above the store's limit
	})
	base, client := serve(t, newEngine(store), h)
	first := send(t, client, base, req{key: "k"})
	require.Equal(t, http.StatusOK, first.status)
	assert.Len(t, first.body, 40_000)
	requireProblem(t, send(t, client, base, req{key: "k"}), http.StatusConflict, nethttp.ProblemResponseNotStored)
}

// smallStore is a store whose items hold max bytes of response.
type smallStore struct {
	storage.StepStore
	max int
}

func (s smallStore) Complete(ctx context.Context, rec storage.Record) error {
	if len(rec.Data) > s.max {
		return fmt.Errorf("%w: %d bytes (limit %d)", storage.ErrTooLarge, len(rec.Data), s.max)
	}
	return s.StepStore.Complete(ctx, rec)
}

func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	c := &counter{}
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), c, nethttp.WithMaxBody(100))
	requireProblem(t, send(t, client, base, req{key: "k", body: `"` + strings.Repeat("x", 100) + `"`}), http.StatusRequestEntityTooLarge, nethttp.ProblemRequestTooLarge)
	g := send(t, client, base, req{key: "k", body: `"` + strings.Repeat("x", 98) + `"`})
	assert.Equal(t, http.StatusCreated, g.status, "a body of exactly the limit is read")
	assert.Equal(t, 1, c.count())
}

// TestFlush: a handler that flushes streams its response; the record is
// completed without it, so a duplicate gets 409 and never runs the handler.
// A streamed status that is never stored releases the record as usual.
func TestFlush(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		status     int
		controller bool // flush through http.ResponseController
	}{
		{"Flusher", http.StatusOK, false},
		{"ResponseController", http.StatusOK, true},
		{"5xx streamed", http.StatusServiceUnavailable, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, "data: 1\n\n")
				if tt.controller {
					require.NoError(t, http.NewResponseController(w).Flush())
				} else {
					w.(http.Flusher).Flush()
				}
				_, _ = io.WriteString(w, "data: 2\n\n")
			})
			base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
			first := send(t, client, base, req{key: "k"})
			require.Equal(t, tt.status, first.status)
			assert.Equal(t, "data: 1\n\ndata: 2\n\n", first.body)
			assert.Equal(t, "text/event-stream", first.header.Get("Content-Type"))
			second := send(t, client, base, req{key: "k"})
			if tt.status == http.StatusOK {
				requireProblem(t, second, http.StatusConflict, nethttp.ProblemResponseNotStored)
				assert.Equal(t, int32(1), runs.Load())
			} else {
				assert.Equal(t, tt.status, second.status)
				assert.Equal(t, int32(2), runs.Load(), "released: the retry runs")
			}
		})
	}
}

func TestHijackNotOffered(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := w.(http.Hijacker)
		assert.False(t, ok, "a keyed request's writer offers no Hijacker")
		_, _, err := http.NewResponseController(w).Hijack()
		assert.ErrorIs(t, err, http.ErrNotSupported)
		assert.NoError(t, http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)), "deadlines reach the real writer")
		_, _ = io.WriteString(w, "ok")
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	assert.Equal(t, "ok", send(t, client, base, req{key: "k"}).body)
}

func TestRequestBodyIntact(t *testing.T) {
	t.Parallel()
	body := `{"b": [1, 2.50, 12345678901234567890], "a": "` + strings.Repeat("é", 5000) + `"}`
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(got), "the handler reads the body as sent, not canonicalized")
		assert.Equal(t, int64(len(body)), r.ContentLength)
		w.WriteHeader(http.StatusAccepted)
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	assert.Equal(t, http.StatusAccepted, send(t, client, base, req{key: "k", body: body}).status)
}

func TestScope(t *testing.T) {
	t.Parallel()
	c := &counter{}
	var logs testlog.Buffer
	scope := func(r *http.Request) (string, error) {
		caller := r.Header.Get("X-Caller")
		if caller == "" {
			return "", errors.New("no caller")
		}
		return caller, nil
	}
	base, client := serve(t, newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs))), c, nethttp.WithScope(scope))
	alice := req{key: "k", body: `{}`, headers: map[string]string{"X-Caller": "alice"}}
	bob := req{key: "k", body: `{}`, headers: map[string]string{"X-Caller": "bob"}}

	assert.False(t, send(t, client, base, alice).replayed())
	assert.False(t, send(t, client, base, bob).replayed(), "the same key of another caller is another record")
	assert.True(t, send(t, client, base, alice).replayed())
	assert.Equal(t, 2, c.count())

	requireProblem(t, send(t, client, base, req{key: "k", body: `{}`}), http.StatusInternalServerError, nethttp.ProblemInternal)
	assert.Equal(t, 2, c.count(), "a caller that cannot be named never runs the handler")
	assert.Contains(t, logs.String(), "cannot name the caller")
}

func TestDownstreamKey(t *testing.T) {
	t.Parallel()
	var keys []string
	var mu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inv, ok := idempotent.FromContext(r.Context())
		require.True(t, ok, "the handler's context carries the invocation")
		dk := idempotent.DownstreamKey(r.Context())
		require.NotEmpty(t, dk)
		assert.NotEmpty(t, inv.RecordID)
		_, hasDeadline := r.Context().Deadline()
		assert.True(t, hasDeadline, "the handler stops before the lease ends")
		mu.Lock()
		keys = append(keys, dk)
		mu.Unlock()
		_, _ = io.WriteString(w, dk)
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	first := send(t, client, base, req{key: "k"})
	second := send(t, client, base, req{key: "k"})
	assert.Equal(t, first.body, second.body)
	other := send(t, client, base, req{key: "k2"})
	assert.NotEqual(t, first.body, other.body)
	assert.Len(t, keys, 2)
}

func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	store := &fakeStore{StepStore: idempotent.NewMemoryStore(), claim: func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
		return storage.ClaimResult{}, errors.New("throttled")
	}}
	c := &counter{}
	base, client := serve(t, newEngine(store), c, nethttp.WithRetryAfter(3*time.Second))
	g := send(t, client, base, req{key: "k"})
	requireProblem(t, g, http.StatusServiceUnavailable, nethttp.ProblemStoreUnavailable)
	assert.Equal(t, "3", g.header.Get("Retry-After"))
	assert.Equal(t, 0, c.count())
}

// TestOuterMiddlewareHeaders: headers an outer middleware sets are seen by
// the handler and set afresh on a replay, never replayed from the record.
func TestOuterMiddlewareHeaders(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	inner := nethttp.Middleware(newEngine(idempotent.NewMemoryStore()))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.NotEmpty(t, w.Header().Get("X-Request-Id"), "the handler sees the outer headers")
		w.Header().Set("X-Handler", "h")
		w.Header().Del("X-Drop-Me")
		_, _ = io.WriteString(w, "ok")
	}))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", fmt.Sprint(n.Add(1)))
		w.Header().Set("X-Drop-Me", "1")
		inner.ServeHTTP(w, r)
	})
	srv := newServer(t, outer)
	first := send(t, srv.Client(), srv.URL, req{key: "k"})
	assert.Equal(t, "1", first.header.Get("X-Request-Id"))
	assert.Empty(t, first.header.Get("X-Drop-Me"), "a header the handler deleted is not sent")
	second := send(t, srv.Client(), srv.URL, req{key: "k"})
	assert.True(t, second.replayed())
	assert.Equal(t, "2", second.header.Get("X-Request-Id"), "the outer middleware's header is its own, not the record's")
	assert.Equal(t, "h", second.header.Get("X-Handler"))
}

func TestBinaryBodyAndNoWrite(t *testing.T) {
	t.Parallel()
	bin := randomBytes(t, 3000)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			return // 200, no body
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(bin)
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	for _, path := range []string{"/bin", "/empty"} {
		first := send(t, client, base, req{path: path, key: "k" + path})
		second := send(t, client, base, req{path: path, key: "k" + path})
		assert.Equal(t, http.StatusOK, second.status)
		assert.True(t, second.replayed())
		assert.Equal(t, first.body, second.body)
		if path == "/bin" {
			assert.Equal(t, string(bin), second.body)
		}
	}
}

func TestPanics(t *testing.T) {
	t.Parallel()
	e := newEngine(idempotent.NewMemoryStore())
	assert.PanicsWithValue(t, "nethttp: WithMethods: no methods", func() { nethttp.Middleware(e, nethttp.WithMethods()) })
	assert.PanicsWithValue(t, "nethttp: Middleware: nil handler", func() { nethttp.Middleware(e)(nil) })
	assert.PanicsWithValue(t, "nethttp: WithScope: nil function", func() { nethttp.WithScope(nil) })
	assert.PanicsWithValue(t, "nethttp: Middleware: nil Engine", func() { nethttp.Middleware(nil) })
}

// TestRequestBodyRead: the body is read whole, whatever the request declares
// (net/http's server holds requests to their Content-Length; a request built
// by hand or by another adapter need not), and refused past the limit.
func TestRequestBodyRead(t *testing.T) {
	t.Parallel()
	const limit = 2000
	errRead := errors.New("connection reset")
	for _, tt := range []struct {
		name   string
		body   io.Reader
		length int64 // the declared Content-Length; -1 unknown
		status int   // the answer
		typ    string
		want   string // the body the handler reads, when it runs
	}{
		{"declared", strings.NewReader(strings.Repeat("a", 1500)), 1500, http.StatusCreated, "", strings.Repeat("a", 1500)},
		{"unknown length, grown past the first read", strings.NewReader(strings.Repeat("b", 1999)), -1, http.StatusCreated, "", strings.Repeat("b", 1999)},
		{"unknown length, exactly the limit", strings.NewReader(strings.Repeat("c", limit)), -1, http.StatusCreated, "", strings.Repeat("c", limit)},
		{"unknown length, one past the limit", strings.NewReader(strings.Repeat("d", limit+1)), -1, http.StatusRequestEntityTooLarge, nethttp.ProblemRequestTooLarge, ""},
		{"declared short of the body", strings.NewReader(strings.Repeat("e", 1200)), 10, http.StatusCreated, "", strings.Repeat("e", 1200)},
		{"declared short, past the limit", strings.NewReader(strings.Repeat("f", 5000)), 10, http.StatusRequestEntityTooLarge, nethttp.ProblemRequestTooLarge, ""},
		{"declared long", strings.NewReader("short"), 1000, http.StatusCreated, "", "short"},
		{"declared past the limit", strings.NewReader("x"), limit + 1, http.StatusRequestEntityTooLarge, nethttp.ProblemRequestTooLarge, ""},
		{"read error", io.MultiReader(strings.NewReader("partial"), iotestErrReader{errRead}), -1, http.StatusBadRequest, nethttp.ProblemMalformedRequest, ""},
		{"empty", strings.NewReader(""), 0, http.StatusCreated, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var read []byte
			ran := false
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = true
				var err error
				read, err = io.ReadAll(r.Body)
				require.NoError(t, err)
				w.WriteHeader(http.StatusCreated)
			})
			mw := nethttp.Middleware(newEngine(idempotent.NewMemoryStore()), nethttp.WithMaxBody(limit))(h)
			r := httptest.NewRequest(http.MethodPost, "/payments", io.NopCloser(tt.body))
			r.ContentLength = tt.length
			r.Header.Set(nethttp.HeaderIdempotencyKey, `"k"`)
			w := httptest.NewRecorder()
			mw.ServeHTTP(w, r)
			if tt.typ != "" {
				requireProblem(t, got{status: w.Code, header: w.Header(), body: w.Body.String()}, tt.status, tt.typ)
				assert.False(t, ran, "refused before the handler")
				return
			}
			require.Equal(t, tt.status, w.Code, w.Body.String())
			assert.Equal(t, tt.want, string(read))
		})
	}
}

// iotestErrReader fails every read with err.
type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// TestHeaderAsOfWriteHeader: the response carries its header as it was at
// WriteHeader, as net/http sends it: changes made later, through w.Header()
// or through the map kept from before (set, deleted, or a value changed in
// place), reach neither the client nor the record. Trailers set after the
// body reach the first client as trailers and are not stored.
func TestHeaderAsOfWriteHeader(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kept := w.Header()
		kept.Set("Content-Type", "application/json")
		kept.Set("X-Deleted-Late", "present")
		kept.Set("X-Changed-Late", "before")
		kept.Add("X-Multi", "a")
		kept.Set("Trailer", "X-Checksum")
		kept["Date"] = nil // net/http then sends no Date
		w.WriteHeader(http.StatusCreated)
		kept.Set("X-Late", "through the kept map")
		w.Header().Set("X-Late-Too", "through w.Header()")
		kept.Del("X-Deleted-Late")
		kept["X-Changed-Late"][0] = "after"
		kept.Add("X-Multi", "b")
		_, _ = io.WriteString(w, `{"ok":true}`)
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "u")
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	for i, name := range []string{"first", "replay"} {
		resp, body := postWhole(t, client, base)
		require.Equal(t, http.StatusCreated, resp.StatusCode, name)
		assert.Equal(t, `{"ok":true}`, body, name)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), name)
		assert.Equal(t, "present", resp.Header.Get("X-Deleted-Late"), name)
		assert.Equal(t, "before", resp.Header.Get("X-Changed-Late"), name)
		assert.Equal(t, []string{"a"}, resp.Header.Values("X-Multi"), name)
		assert.Empty(t, resp.Header.Get("X-Late"), name)
		assert.Empty(t, resp.Header.Get("X-Late-Too"), name)
		assert.Empty(t, resp.Header.Get("X-Checksum"), name)
		if i == 0 {
			assert.Equal(t, "abc", resp.Trailer.Get("X-Checksum"), "the first client gets the trailers")
			assert.Equal(t, "u", resp.Trailer.Get("X-Undeclared"))
			assert.Empty(t, resp.Header.Get(nethttp.HeaderReplayed))
			assert.NotContains(t, resp.Header, "Date", "a nil value is kept as nil")
		} else {
			assert.Empty(t, resp.Trailer.Get("X-Checksum"), "trailers are not stored")
			assert.Empty(t, resp.Trailer.Get("X-Undeclared"))
			assert.Equal(t, "true", resp.Header.Get(nethttp.HeaderReplayed))
		}
	}
}

// TestBodyReadAfterHandler: the body's buffer is reused once the handler is
// done, so a read after that (which net/http forbids: its own body fails
// the same way) fails instead of reading another request's body.
func TestBodyReadAfterHandler(t *testing.T) {
	t.Parallel()
	bodies := make(chan io.Reader, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodies <- r.Body // kept past the handler's end, unread
		w.WriteHeader(http.StatusAccepted)
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	require.Equal(t, http.StatusAccepted, send(t, client, base, req{key: "a", body: `{"secret":"first"}`}).status)
	require.Equal(t, http.StatusAccepted, send(t, client, base, req{key: "b", body: `{"secret":"second"}`}).status)
	for range 2 {
		n, err := (<-bodies).Read(make([]byte, 64))
		assert.Zero(t, n)
		assert.ErrorIs(t, err, http.ErrBodyReadAfterClose)
	}
}

// TestTrailersAfterFlush: a response that passes through (flushed) is the
// handler's own, trailers included, as without the middleware.
func TestTrailersAfterFlush(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "part one;")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "part two")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "u")
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	resp, body := postWhole(t, client, base)
	assert.Equal(t, "part one;part two", body)
	assert.Equal(t, "abc", resp.Trailer.Get("X-Checksum"))
	assert.Equal(t, "u", resp.Trailer.Get("X-Undeclared"))
}

// postWhole sends POST /payments with the key "k" and reads the whole
// response, trailers included (they arrive after the body).
func postWhole(t testing.TB, client *http.Client, base string) (*http.Response, string) {
	t.Helper()
	r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/payments", strings.NewReader(`{}`))
	require.NoError(t, err)
	r.Header.Set(nethttp.HeaderIdempotencyKey, `"k"`)
	resp, err := client.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// TestHeaderNotUTF8NotStored: a response header value that is not valid
// UTF-8 could not be replayed byte for byte (the stored form is JSON), so the
// first client gets the response and the record is completed without it: a
// retry gets 409 response-not-stored and the handler does not run again.
func TestHeaderNotUTF8NotStored(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("X-Note", "caf\xe9")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mw := nethttp.Middleware(newEngine(idempotent.NewMemoryStore()))(h)
	call := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(nethttp.HeaderIdempotencyKey, `"k"`)
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, r)
		return w
	}
	first := call()
	require.Equal(t, http.StatusCreated, first.Code)
	assert.Equal(t, "caf\xe9", first.Header().Get("X-Note"))
	assert.Equal(t, `{"ok":true}`, first.Body.String())
	second := call()
	assert.Equal(t, http.StatusConflict, second.Code)
	assert.Contains(t, second.Body.String(), nethttp.ProblemResponseNotStored)
	assert.Equal(t, int32(1), runs.Load())
}
