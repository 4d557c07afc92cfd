package nethttp_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// newEngine is a test's Engine over store, configured by opts; its logs are
// discarded unless opts give idempotent.WithLogger.
func newEngine(store storage.Store, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithLogger(testlog.Logger(io.Discard))}, opts...)...)
}

// serve starts a real HTTP server on 127.0.0.1 with h behind the middleware
// over e (on every path) and returns its base URL and client.
func serve(t testing.TB, e *idempotent.Engine, h http.Handler, opts ...nethttp.Option) (string, *http.Client) {
	t.Helper()
	srv := newServer(t, nethttp.Middleware(e, opts...)(h))
	return srv.URL, srv.Client()
}

// req is one request of a test: POST /payments by default.
type req struct {
	method  string
	path    string // with the query
	key     string // the Idempotency-Key header; "" sends none
	body    string
	ctype   string // default application/json
	headers map[string]string
}

// got is a response as a real client received it.
type got struct {
	status int
	header http.Header
	body   string
}

func (g got) replayed() bool { return g.header.Get(nethttp.HeaderReplayed) == "true" }

func send(t testing.TB, client *http.Client, base string, r req) got {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/payments"
	}
	hr, err := http.NewRequestWithContext(context.Background(), r.method, base+r.path, strings.NewReader(r.body))
	require.NoError(t, err)
	if r.key != "" {
		hr.Header.Set(nethttp.HeaderIdempotencyKey, r.key)
	}
	if r.ctype == "" {
		r.ctype = "application/json"
	}
	hr.Header.Set("Content-Type", r.ctype)
	for k, v := range r.headers {
		hr.Header.Set(k, v)
	}
	resp, err := client.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return got{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// requireProblem asserts a problem+json answer of the given status and type.
func requireProblem(t testing.TB, g got, status int, typ string) {
	t.Helper()
	require.Equal(t, status, g.status, "body: %s", g.body)
	assert.Equal(t, nethttp.ContentTypeProblem, g.header.Get("Content-Type"))
	assert.Equal(t, "no-store", g.header.Get("Cache-Control"))
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal([]byte(g.body), &p), g.body)
	assert.Equal(t, typ, p.Type)
	assert.Equal(t, status, p.Status)
	assert.NotEmpty(t, p.Title)
	assert.NotEmpty(t, p.Detail)
	assert.False(t, g.replayed(), "a problem is never a replay")
}

// counter is a handler answering 201 with a JSON body that numbers its runs
// and echoes the request body.
type counter struct{ runs atomic.Int32 }

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/1")
	w.WriteHeader(http.StatusCreated)
	out, _ := json.Marshal(map[string]any{"run": n, "got": string(body)})
	_, _ = w.Write(out)
}

func (c *counter) count() int { return int(c.runs.Load()) }

// fakeStore puts faults in front of a MemoryStore; nil functions delegate.
type fakeStore struct {
	storage.StepStore
	claim func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error)
}

func (s *fakeStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if s.claim != nil {
		return s.claim(ctx, rec, now)
	}
	return s.StepStore.Claim(ctx, rec, now)
}

// newServer starts a real HTTP server on 127.0.0.1 serving h.
func newServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	srv.Client().CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return srv
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}
