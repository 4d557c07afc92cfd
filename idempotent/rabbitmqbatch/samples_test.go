package rabbitmqbatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/rabbitmqbatch"
	"github.com/idemkit/idemkit/internal/batchtest"
	"github.com/idemkit/idemkit/internal/sampleevents"
)

// TestSample: events/rabbitmq.json gives what events/README.md says: each
// payment once, in order, and the same batch again replays all three.
func TestSample(t *testing.T) {
	t.Parallel()
	ev, err := sampleevents.RabbitMQ(sampleevents.RabbitMQBatch)
	require.NoError(t, err)
	var rec batchtest.Recorder
	h := rabbitmqbatch.Wrap(batchtest.Engine(idempotent.NewMemoryStore(), batchtest.NewClock()), handler(&rec))
	require.NoError(t, h(context.Background(), ev))
	assert.Equal(t, []string{"pay_3001", "pay_3002", "pay_3003"}, rec.Calls())
	require.NoError(t, h(context.Background(), ev))
	assert.Empty(t, rec.Calls())
}
