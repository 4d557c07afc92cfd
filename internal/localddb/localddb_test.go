package localddb_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestClientWithoutEndpoint is not parallel: it changes the environment.
func TestClientWithoutEndpoint(t *testing.T) {
	t.Setenv(localddb.EnvEndpoint, "")
	_, err := localddb.Client(context.Background())
	assert.True(t, errors.Is(err, localddb.ErrNoEndpoint))
}

func TestUniqueTables(t *testing.T) {
	t.Parallel()
	a, b := localddb.UniqueTables("TestX/sub test"), localddb.UniqueTables("TestX/sub test")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^TestX-sub-test-[0-9a-f]{10}-idempotency$`, a.Idempotency)
	assert.True(t, strings.HasSuffix(a.Payments, "-payments"))
	assert.True(t, strings.HasSuffix(a.Inventory, "-inventory"))
	long := localddb.UniqueTables(strings.Repeat("x", 400))
	assert.LessOrEqual(t, len(long.Idempotency), 255)
	assert.Regexp(t, `^idemkit-[0-9a-f]{10}-payments$`, localddb.UniqueTables("///").Payments)
}

func TestCreateTables(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	names := localddbtest.Tables(t, client)
	ctx := t.Context()

	for _, spec := range names.Specs() {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec.Name)})
		require.NoError(t, err)
		tbl := out.Table
		assert.Equal(t, types.TableStatusActive, tbl.TableStatus)
		require.Len(t, tbl.KeySchema, 1)
		assert.Equal(t, spec.PartitionKey, *tbl.KeySchema[0].AttributeName)
		assert.Equal(t, types.KeyTypeHash, tbl.KeySchema[0].KeyType)
		require.NotNil(t, tbl.BillingModeSummary)
		assert.Equal(t, types.BillingModePayPerRequest, tbl.BillingModeSummary.BillingMode)

		ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(spec.Name)})
		require.NoError(t, err)
		if spec.TTLAttribute == "" {
			assert.Equal(t, types.TimeToLiveStatusDisabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
			continue
		}
		assert.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
		assert.Equal(t, spec.TTLAttribute, *ttl.TimeToLiveDescription.AttributeName)
	}
	assert.Equal(t, "id", names.Specs()[0].PartitionKey)
	assert.Equal(t, "expiration", names.Specs()[0].TTLAttribute)
	assert.Equal(t, "paymentId", names.Specs()[1].PartitionKey)
	assert.Equal(t, "sku", names.Specs()[2].PartitionKey)
}

func TestSortKeyAndScan(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	ctx := t.Context()
	table := localddb.Table{Name: localddb.UniqueTables(t.Name()).Idempotency, PartitionKey: "pk", SortKey: "sk"}
	require.NoError(t, localddb.CreateTable(ctx, client, table))
	t.Cleanup(func() { assert.NoError(t, localddb.DeleteTable(context.Background(), client, table.Name)) })

	for _, sk := range []string{"a", "b", "c"} {
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table.Name), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: sk},
		}})
		require.NoError(t, err)
	}
	type item struct {
		PK string `dynamodbav:"pk"`
		SK string `dynamodbav:"sk"`
	}
	items, err := localddb.Scan[item](ctx, client, table.Name)
	require.NoError(t, err)
	assert.ElementsMatch(t, []item{{"p", "a"}, {"p", "b"}, {"p", "c"}}, items)
}

func TestDeleteMissingTable(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	assert.NoError(t, localddb.DeleteTable(t.Context(), client, "idemkit-never-created"))
	assert.NoError(t, localddb.DeleteTables(t.Context(), client, localddb.UniqueTables("never")))
}
