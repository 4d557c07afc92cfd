package receipts_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/receipts"
)

func TestLocalMailer(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	m := &receipts.LocalMailer{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	r := receipts.Receipt{PaymentID: "pay_1", CustomerID: "cus_secret", Amount: 100, Currency: "EUR"}

	first, err := m.Send(t.Context(), "k1", r)
	require.NoError(t, err)
	again, err := m.Send(t.Context(), "k1", r)
	require.NoError(t, err)
	assert.Equal(t, first, again, "the same key answers with the same message")
	other, err := m.Send(t.Context(), "k2", r)
	require.NoError(t, err)
	assert.NotEqual(t, first, other, "another key sends another message")

	assert.Equal(t, 2, m.Sent("pay_1"))
	assert.Equal(t, 1, m.Deduplicated())
	assert.Equal(t, []receipts.Receipt{r, r}, m.Receipts())
	assert.Equal(t, 2, bytes.Count(logs.Bytes(), []byte(`"msg":"receipts: receipt sent"`)))
	assert.NotContains(t, logs.String(), "cus_secret", "no customer in the logs")
	assert.NotContains(t, logs.String(), "k1", "no key in the logs")
}

func TestLocalMailerEmptyKey(t *testing.T) {
	t.Parallel()
	var m receipts.LocalMailer // the zero value is ready
	for range 2 {
		_, err := m.Send(t.Context(), "", receipts.Receipt{PaymentID: "pay_1"})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, m.Sent("pay_1"), "no key, no deduplication (a run with idempotency disabled)")
	assert.Zero(t, m.Deduplicated())
}

func TestLocalMailerCancelled(t *testing.T) {
	t.Parallel()
	var m receipts.LocalMailer
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := m.Send(ctx, "k", receipts.Receipt{PaymentID: "pay_1"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, m.Sent("pay_1"))
}

func TestLocalMailerConcurrent(t *testing.T) {
	t.Parallel()
	var m receipts.LocalMailer
	var wg sync.WaitGroup
	ids := make([]string, 50)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := m.Send(t.Context(), fmt.Sprint("k", i%5), receipts.Receipt{PaymentID: fmt.Sprint("pay_", i%5)})
			assert.NoError(t, err)
			ids[i] = id
		}()
	}
	wg.Wait()
	for i := range 5 {
		assert.Equal(t, 1, m.Sent(fmt.Sprint("pay_", i)))
	}
	assert.Equal(t, 45, m.Deduplicated())
	for i, id := range ids {
		assert.Equal(t, ids[i%5], id)
	}
}
