package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestTx runs bench/tx.go's scenarios on DynamoDB Local: a handler write in
// the completion's transaction costs 2 calls per new key against 3 without,
// and its capacity is reported for every call, TransactWriteItems included,
// at twice a plain write's units per item.
func TestTx(t *testing.T) {
	localddbtest.Require(t)
	client, err := newClient(t.Context(), 4, &calls{})
	require.NoError(t, err)
	tmpl, err := loadPaymentEvent(".")
	require.NoError(t, err)
	r := runTx(t.Context(), client, tmpl, 20)
	require.Empty(t, r.Err)
	require.Len(t, r.Calls, 2)
	for _, c := range r.Calls {
		assert.True(t, c.ok(), "%s: calls %v, target %d, problem %q, ops %v", c.Scenario, c.Calls, c.Target, c.Problem, c.Ops)
	}
	assert.Equal(t, []string{"PutItem", "TransactWriteItems"}, r.Calls[0].Ops)
	assert.Equal(t, []string{"PutItem", "PutItem", "UpdateItem"}, r.Calls[1].Ops)

	require.Len(t, r.Capacity, 2)
	tx, plain := r.Capacity[0], r.Capacity[1]
	for _, c := range r.Capacity {
		assert.Empty(t, c.Problem, c.Scenario)
	}
	assert.InDelta(t, 2*(plain.Units-plain.ByOp["PutItem"]/2)+plain.ByOp["PutItem"]/2, tx.Units, 0.01,
		"the claim costs the same; the completion and the row cost twice in a transaction")
	var out strings.Builder
	(&report{tx: r}).writeTx(func(format string, args ...any) { fmt.Fprintf(&out, format, args...) })
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), "| new key, one handler write in the completion transaction | 20 |")
}
