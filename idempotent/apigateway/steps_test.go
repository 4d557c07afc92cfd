package apigateway_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// Steps work behind the adapter: a 503 after the charge step is not stored,
// and the client's retry resumes after the charge.
func TestStepsResumeAfterAFailedResponse(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			var charges, attempts atomic.Int32
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(ctx context.Context, r req) (resp, error) {
				id, err := idempotent.Step(ctx, "charge", func(context.Context) (string, error) {
					charges.Add(1)
					return "ch_1", nil
				})
				if err != nil {
					return resp{}, err
				}
				if attempts.Add(1) == 1 {
					return resp{status: http.StatusServiceUnavailable, body: "ledger unavailable"}, nil
				}
				return resp{status: http.StatusCreated, body: id}, nil
			})
			r := post("pay-1", `{"amount":1500}`)
			require.Equal(t, http.StatusServiceUnavailable, call(r).status)
			retry := call(r)
			require.Equal(t, http.StatusCreated, retry.status)
			assert.Equal(t, "ch_1", retry.body)
			again := call(r)
			assert.True(t, replayed(again))
			assert.Equal(t, int32(1), charges.Load(), "the charge ran again")
		})
	}
}
