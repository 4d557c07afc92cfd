package nethttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// txStore is a storage.TxStore over the memory store whose writes are
// strings, committed with the completion (or alone) unless commitErr is set.
type txStore struct {
	storage.Store

	mu        sync.Mutex
	commitErr error
	committed []string
}

func newTxStore() *txStore { return &txStore{Store: idempotent.NewMemoryStore()} }

func (s *txStore) BeginTx(context.Context, string, string) (storage.Tx, error) {
	return &stringTx{s: s}, nil
}

func (s *txStore) writes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.committed...)
}

type stringTx struct {
	s       *txStore
	mu      sync.Mutex
	pending []string
}

func (t *stringTx) Commit(ctx context.Context, rec storage.Record) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.commitErr != nil {
		return t.s.commitErr
	}
	if rec.ID != "" {
		if err := t.s.Complete(ctx, rec); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.committed = append(t.s.committed, t.pending...)
	return nil
}

func (t *stringTx) Rollback(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = nil
	return nil
}

// addWrite is what a store's accessor does: find the run's Tx, add to it.
func addWrite(ctx context.Context, w string) error {
	tx, err := storage.TxFromContext(ctx)
	if err != nil {
		return err
	}
	st := tx.(*stringTx)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pending = append(st.pending, w)
	return nil
}

var errAborted = fmt.Errorf("stock: %w: stock would go negative", storage.ErrTxAborted)

// A handler that opens its transaction, then writes and flushes its
// response: the response is held until the commit, so a client whose
// writes did not commit never sees the handler's success.
func TestTxResponseIsHeldUntilTheCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		opts []idempotent.Option
	}{
		{"keyed", "k-1", nil},
		{"without a key", "", []idempotent.Option{idempotent.WithOptionalKey()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, abort := range []bool{true, false} {
				t.Run(fmt.Sprintf("aborted=%v", abort), func(t *testing.T) {
					store := newTxStore()
					if abort {
						store.commitErr = errAborted
					}
					var flushErr error
					h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						require.NoError(t, addWrite(r.Context(), "reserve"))
						w.WriteHeader(http.StatusCreated)
						_, _ = io.WriteString(w, "reserved")
						flushErr = http.NewResponseController(w).Flush()
						_, _ = io.WriteString(w, ", for sure")
					})
					base, client := serve(t, newEngine(store, tc.opts...), h)
					g := send(t, client, base, req{key: tc.key, body: `{}`})
					require.Error(t, flushErr, "nothing is flushed while the transaction is open")
					if abort {
						requireProblem(t, g, http.StatusConflict, nethttp.ProblemTxAborted)
						assert.NotContains(t, g.body, "reserved")
						assert.Empty(t, store.writes())
						return
					}
					assert.Equal(t, http.StatusCreated, g.status)
					assert.Equal(t, "reserved, for sure", g.body)
					assert.Equal(t, []string{"reserve"}, store.writes())
					if tc.key != "" {
						again := send(t, client, base, req{key: tc.key, body: `{}`})
						assert.Equal(t, "reserved, for sure", again.body, "held, not streamed: stored and replayed")
						assert.True(t, again.replayed())
					}
				})
			}
		})
	}
}

// Once the response has begun to reach the client, the handler gets no
// transaction: its writes could fail to commit after the client saw a
// success.
func TestTxRefusedAfterTheResponseBegan(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   string
		write func(w http.ResponseWriter)
		opts  []idempotent.Option
	}{
		{"keyed, flushed", "k-1", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, nil},
		{"keyed, past the body limit", "k-2", func(w http.ResponseWriter) { _, _ = io.WriteString(w, strings.Repeat("x", 2048)) }, nil},
		{"without a key, written", "", func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }, []idempotent.Option{idempotent.WithOptionalKey()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newTxStore()
			var txErr error
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.write(w)
				txErr = addWrite(r.Context(), "late")
			})
			base, client := serve(t, newEngine(store, tc.opts...), h, nethttp.WithMaxBody(1024))
			send(t, client, base, req{key: tc.key, body: `{}`})
			require.ErrorIs(t, txErr, idempotent.ErrNoTx)
			assert.ErrorContains(t, txErr, "began to reach the client")
			assert.Empty(t, store.writes())
		})
	}
}

// A response past the body limit, held for the transaction, reaches the
// client after the commit and is not stored.
func TestTxHeldResponsePastTheLimit(t *testing.T) {
	store := newTxStore()
	big := strings.Repeat("x", 4096)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, addWrite(r.Context(), "w"))
		_, _ = io.WriteString(w, big)
	})
	base, client := serve(t, newEngine(store), h, nethttp.WithMaxBody(1024))
	g := send(t, client, base, req{key: "k", body: `{}`})
	assert.Equal(t, http.StatusOK, g.status)
	assert.Equal(t, big, g.body)
	assert.Equal(t, []string{"w"}, store.writes())
	requireProblem(t, send(t, client, base, req{key: "k", body: `{}`}), http.StatusConflict, nethttp.ProblemResponseNotStored)
}

// Without a transaction, a request without a key still passes straight
// through: its response begins before the handler returns.
func TestNoTxWithoutAKeyStreams(t *testing.T) {
	store := newTxStore()
	flushed := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		close(flushed)
		<-release
		_, _ = io.WriteString(w, " second")
	})
	base, client := serve(t, newEngine(store, idempotent.WithOptionalKey()), h)
	hr, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/payments", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp, err := client.Do(hr)
	require.NoError(t, err, "the status arrived while the handler still runs")
	defer resp.Body.Close()
	<-flushed
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	close(release)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "first second", string(body))
}

// ownWriter is a ResponseWriter the test can recognize in the handler.
type ownWriter struct{ http.ResponseWriter }

// TestUnkeyedRequestsGetTheRealWriterWithoutTransactions: over a store
// without transactions, a request that runs without idempotency (no key
// under WithOptionalKey) reaches the handler with the server's own writer,
// as without the middleware (Hijack and 1xx stay available); only a store
// with transactions makes the middleware hold such a response.
func TestUnkeyedRequestsGetTheRealWriterWithoutTransactions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store storage.Store
		real  bool
	}{
		{"memory store", idempotent.NewMemoryStore(), true},
		{"store with transactions", newTxStore(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotReal bool
			h := nethttp.Middleware(idempotent.New(tc.store, idempotent.WithOptionalKey()))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, gotReal = w.(*ownWriter)
				w.WriteHeader(http.StatusCreated)
			}))
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"a":1}`))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(&ownWriter{rec}, req)
			assert.Equal(t, tc.real, gotReal)
			assert.Equal(t, http.StatusCreated, rec.Code)
		})
	}
}
