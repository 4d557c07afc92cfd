package nethttp_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// Steps work behind the middleware: a 503 after the charge step is not
// stored, and the client's retry resumes after the charge instead of
// charging again.
func TestStepsResumeAfterAFailedResponse(t *testing.T) {
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
			http.Error(w, "ledger unavailable", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(id))
	})
	base, client := serve(t, newEngine(idempotent.NewMemoryStore()), h)
	r := req{key: "pay-1", body: `{"amount":1500}`}

	first := send(t, client, base, r)
	require.Equal(t, http.StatusServiceUnavailable, first.status)
	retry := send(t, client, base, r)
	require.Equal(t, http.StatusCreated, retry.status)
	assert.Equal(t, "ch_1", retry.body)
	assert.False(t, retry.replayed())
	replay := send(t, client, base, r)
	assert.True(t, replay.replayed())
	assert.Equal(t, "ch_1", replay.body)
	assert.Equal(t, int32(1), charges.Load(), "the charge ran again")

	// Another body for the key is refused while the record lives.
	assert.Equal(t, http.StatusUnprocessableEntity, send(t, client, base, req{key: "pay-1", body: `{"amount":9}`}).status)
}
