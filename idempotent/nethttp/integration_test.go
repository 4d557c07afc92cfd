package nethttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestStores runs the client's view of the middleware over a real
// http.Server on a loopback port and a real http.Client, on the memory store
// and on DynamoDB Local (skipped without AWS_ENDPOINT_URL_DYNAMODB; see
// scripts/with-dynamodb.sh): new key, retry replayed, concurrent duplicate
// 409, other body 422, missing key 400, a 5xx retried, a client that hung
// up retried.
func TestStores(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		make func(t *testing.T) storage.Store
	}{
		{"memory", func(*testing.T) storage.Store { return idempotent.NewMemoryStore() }},
		{"DynamoDB Local", func(t *testing.T) storage.Store {
			client := localddbtest.Client(t)
			tables := localddbtest.Tables(t, client)
			return dynamostore.New(client, tables.Idempotency)
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.make(t)
			var runs, hangups atomic.Int32
			started, release := make(chan struct{}, 1), make(chan struct{})
			mux := http.NewServeMux()
			idem := nethttp.Middleware(newEngine(store))
			mux.Handle("POST /payments", idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				if r.URL.Query().Get("slow") != "" {
					started <- struct{}{}
					<-release
				}
				if r.URL.Query().Get("hangup") != "" && hangups.Add(1) == 1 {
					<-r.Context().Done() // the client hung up: nothing to answer
					return
				}
				if r.URL.Query().Get("fail") != "" {
					http.Error(w, "down", http.StatusBadGateway)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{"payment":"`+idempotent.DownstreamKey(r.Context())[:8]+`"}`)
			})))

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go func() {
				if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("serve: %v", err)
				}
			}()
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			})
			base, client := "http://"+ln.Addr().String(), &http.Client{Timeout: 30 * time.Second}

			first := send(t, client, base, req{key: "k1", body: `{"amount":100}`})
			require.Equal(t, http.StatusCreated, first.status, first.body)
			again := send(t, client, base, req{key: "k1", body: `{ "amount": 100 }`})
			assert.Equal(t, http.StatusCreated, again.status)
			assert.Equal(t, first.body, again.body)
			assert.True(t, again.replayed())
			requireProblem(t, send(t, client, base, req{key: "k1", body: `{"amount":200}`}), http.StatusUnprocessableEntity, nethttp.ProblemPayloadMismatch)
			requireProblem(t, send(t, client, base, req{body: `{"amount":100}`}), http.StatusBadRequest, nethttp.ProblemMissingKey)
			assert.Equal(t, int32(1), runs.Load())

			slow := req{path: "/payments?slow=1", key: "k2", body: `{}`}
			done := make(chan got)
			go func() { done <- send(t, client, base, slow) }()
			<-started
			busy := send(t, client, base, slow)
			requireProblem(t, busy, http.StatusConflict, nethttp.ProblemInProgress)
			assert.Equal(t, "1", busy.header.Get("Retry-After"))
			close(release)
			assert.Equal(t, http.StatusCreated, (<-done).status)
			assert.True(t, send(t, client, base, slow).replayed())

			fail := req{path: "/payments?fail=1", key: "k3", body: `{}`}
			assert.Equal(t, http.StatusBadGateway, send(t, client, base, fail).status)
			g := send(t, client, base, fail)
			assert.Equal(t, http.StatusBadGateway, g.status)
			assert.False(t, g.replayed(), "a 5xx is not stored: the retry runs again")
			assert.Equal(t, int32(4), runs.Load())

			hang := req{path: "/payments?hangup=1", key: "k4", body: `{}`}
			hangUp(t, client, base, hang, 300*time.Millisecond)
			g = sendAgain(t, client, base, hang)
			assert.Equal(t, http.StatusCreated, g.status, g.body)
			assert.False(t, g.replayed(), "a client that hung up is not a stored response: the retry runs again")
			assert.Equal(t, int32(6), runs.Load())
		})
	}
}
