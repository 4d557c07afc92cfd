package nethttp_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/internal/testlog"
)

// TestContextScope: what runs before the middleware names the caller in
// the request's context (ContextWithScope), or says why it cannot
// (ContextWithScopeError); WithScope wins over both.
func TestContextScope(t *testing.T) {
	t.Parallel()
	// outer names the caller from X-Caller; "?" is one it cannot name.
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch caller := r.Header.Get("X-Caller"); caller {
			case "":
			case "?":
				r = r.WithContext(nethttp.ContextWithScopeError(r.Context(), errors.New("the authorizer named no caller")))
			default:
				// The last one counts.
				ctx := nethttp.ContextWithScopeError(r.Context(), errors.New("overridden"))
				r = r.WithContext(nethttp.ContextWithScope(ctx, caller))
			}
			next.ServeHTTP(w, r)
		})
	}
	as := func(caller, key string) req {
		return req{key: key, body: `{}`, headers: map[string]string{"X-Caller": caller}}
	}
	tests := []struct {
		name string
		opts []nethttp.Option
		// bobReplays: bob's request with alice's key replays alice's response.
		bobReplays bool
	}{
		{name: "the context's scope", bobReplays: false},
		{name: "WithScope wins", opts: []nethttp.Option{nethttp.WithScope(func(*http.Request) (string, error) { return "everyone", nil })}, bobReplays: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &counter{}
			var logs testlog.Buffer
			e := newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(testlog.Logger(&logs)))
			srv := newServer(t, outer(nethttp.Middleware(e, tt.opts...)(c)))
			base, client := srv.URL, srv.Client()

			assert.False(t, send(t, client, base, as("alice", "k")).replayed())
			assert.Equal(t, tt.bobReplays, send(t, client, base, as("bob", "k")).replayed())
			assert.True(t, send(t, client, base, as("alice", "k")).replayed())

			runs := c.count()
			unnamed := send(t, client, base, as("?", "k2"))
			if tt.opts != nil {
				assert.Equal(t, http.StatusCreated, unnamed.status, "WithScope names the caller: the context's error is not read")
				return
			}
			requireProblem(t, unnamed, http.StatusInternalServerError, nethttp.ProblemInternal)
			assert.Equal(t, runs, c.count(), "a caller that cannot be named never runs the handler")
			assert.Contains(t, logs.String(), "the authorizer named no caller")
			assert.Contains(t, logs.String(), `"level":"ERROR"`)

			// A request without idempotency needs no scope, and runs.
			get := as("?", "")
			get.method = http.MethodGet
			require.Equal(t, http.StatusCreated, send(t, client, base, get).status)
			assert.Equal(t, runs+1, c.count())
		})
	}
	t.Run("unscoped", func(t *testing.T) {
		t.Parallel()
		c := &counter{}
		base, client := serve(t, newEngine(idempotent.NewMemoryStore()), c)
		send(t, client, base, as("alice", "k"))
		assert.True(t, send(t, client, base, as("bob", "k")).replayed(), "without a scope every caller shares one key space")
	})
	assert.PanicsWithValue(t, "nethttp: ContextWithScopeError: nil error", func() {
		nethttp.ContextWithScopeError(context.Background(), nil)
	})
}
