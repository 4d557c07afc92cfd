package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestFloorItemsAreTheStores holds §2's floor to what it claims: its claim
// and completion are dynamostore's (captured), so the item it leaves has
// the attributes, of the same types, that the wrapper's does, and a replay
// on the floor hands back the response the wrapper's replay does.
func TestFloorItemsAreTheStores(t *testing.T) {
	localddbtest.Require(t)
	ctx := t.Context()
	client, err := newClient(ctx, 4, &calls{})
	require.NoError(t, err)
	table, err := createTable(ctx, client, "floor")
	require.NoError(t, err)
	t.Cleanup(func() { deleteTable(client, table) })
	tmpl, err := loadPaymentEvent(".")
	require.NoError(t, err)

	floor := &bare{client: client, table: table}
	onFloor := tmpl
	onFloor.IdempotencyKey = "floor-key"
	require.NoError(t, floor.invoke(ctx, onFloor), "the floor's first run")

	engine := idempotent.New(dynamostore.New(client, table), idempotent.WithPrefix("bench"), idempotent.WithExpiry(time.Hour))
	wrapped := idempotent.Wrap(engine, chargeHandler, idempotent.WithKey(eventKey))
	viaWrap := tmpl
	viaWrap.IdempotencyKey = "wrapped-key"
	first, err := wrapped(ctx, viaWrap)
	require.NoError(t, err, "the wrapper's first run")

	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: &table})
	require.NoError(t, err)
	require.Len(t, out.Items, 2)
	shapes := map[string]map[string]string{} // "floor" or "wrapped": attribute -> type
	for _, item := range out.Items {
		id := item["id"].(*types.AttributeValueMemberS).Value
		side := "wrapped"
		if strings.HasPrefix(id, "bare#") {
			side = "floor"
		}
		shapes[side] = map[string]string{}
		for name, v := range item {
			shapes[side][name] = fmt.Sprintf("%T", v) // the attribute's type
		}
	}
	assert.Equal(t, shapes["wrapped"], shapes["floor"], "the floor's completed item has the wrapper's attributes and types")
	assert.Equal(t, "*types.AttributeValueMemberS", shapes["floor"]["status"])
	assert.Contains(t, shapes["floor"], "data")

	// Replays: the floor decodes the stored response the wrapper replays.
	require.NoError(t, floor.replay(ctx, onFloor), "the floor's replay")
	again, err := wrapped(ctx, viaWrap)
	require.NoError(t, err)
	assert.Equal(t, first, again, "the wrapper's replay")
}
