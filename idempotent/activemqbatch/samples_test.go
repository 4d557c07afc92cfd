package activemqbatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/activemqbatch"
	"github.com/idemkit/idemkit/internal/batchtest"
	"github.com/idemkit/idemkit/internal/sampleevents"
)

// TestSample: events/activemq.json gives what events/README.md says: each
// payment once, in order, and the same batch again replays all three.
func TestSample(t *testing.T) {
	t.Parallel()
	ev, err := sampleevents.ActiveMQ(sampleevents.ActiveMQBatch)
	require.NoError(t, err)
	var rec batchtest.Recorder
	h := activemqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec))
	require.NoError(t, h(context.Background(), ev))
	assert.Equal(t, []string{"pay_4001", "pay_4002", "pay_4003"}, rec.Calls())
	require.NoError(t, h(context.Background(), ev))
	assert.Empty(t, rec.Calls())
}
