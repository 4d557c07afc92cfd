package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// localClient returns a client for the DynamoDB at AWS_ENDPOINT_URL_DYNAMODB
// (DynamoDB Local or LocalStack, as scripts/with-dynamodb.sh provides). Without
// it the test is skipped, or fails when IDEMKIT_REQUIRE_DYNAMODB=1.
func localClient(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		if os.Getenv("IDEMKIT_REQUIRE_DYNAMODB") == "1" {
			t.Fatal("IDEMKIT_REQUIRE_DYNAMODB=1 but AWS_ENDPOINT_URL_DYNAMODB is not set")
		}
		t.Skip("AWS_ENDPOINT_URL_DYNAMODB is not set (run under scripts/with-dynamodb.sh)")
	}
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	require.NoError(t, err)
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local's error responses lack the CRC32 header.
		o.DisableValidateResponseChecksum = true
	}}, optFns...)...)
}

// withMiddleware adds SDK middleware (such as a callCounter) to a client.
func withMiddleware(apiOptions ...func(*middleware.Stack) error) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, apiOptions...) }
}

// quickRetries makes the SDK retry at once, for tests that provoke retries.
func quickRetries(o *dynamodb.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
}

// layout is a table key schema the integration tests run on.
type layout struct {
	name      string
	composite bool
}

var layouts = []layout{{"partition key", false}, {"composite key", true}}

// createTable creates a uniquely named on-demand table with TTL on
// expiration, deleted when the test ends. Its key is id (S), or pk and sk (S)
// in the composite layout.
func createTable(t testing.TB, client *dynamodb.Client, composite bool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "idemkit-test-" + hex.EncodeToString(b[:])
	in := &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	}
	if composite {
		in.AttributeDefinitions = []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		}
		in.KeySchema = []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := client.CreateTable(ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table}); err != nil {
			t.Errorf("delete table %s: %v", table, err)
		}
	})
	require.NoError(t, dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, time.Minute))
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiration"), Enabled: aws.Bool(true)},
	})
	require.NoError(t, err)
	return table
}

// compositeOptions configures a Store for createTable's composite layout.
func compositeOptions(o *dynamostore.Options) {
	o.KeyAttr = "pk"
	o.SortKeyAttr = "sk"
}

// newLocalStore returns a Store on a fresh table of the given layout.
func newLocalStore(t testing.TB, client *dynamodb.Client, l layout) (*dynamostore.Store, string) {
	t.Helper()
	table := createTable(t, client, l.composite)
	var opts []func(*dynamostore.Options)
	if l.composite {
		opts = append(opts, compositeOptions)
	}
	return dynamostore.New(client, table, opts...), table
}

// callCounter is an SDK middleware that records the operation name of every
// request attempt sent to DynamoDB (it sits in the Finalize step after the
// retry middleware, so a retried call counts each attempt).
type callCounter struct {
	mu    sync.Mutex
	calls []string
}

func (c *callCounter) apiOption(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("idemkitCallCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.calls = append(c.calls, awsmiddleware.GetOperationName(ctx))
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// take returns the calls recorded since the last take.
func (c *callCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	if calls == nil {
		calls = []string{}
	}
	return calls
}

// lostResponse is a retryable transport failure after DynamoDB applied the
// request: the situation of a response lost on the way back.
type lostResponse struct{}

func (lostResponse) Error() string        { return "test: response lost" }
func (lostResponse) RetryableError() bool { return true }

// responseLoser makes the SDK lose the response of the next successful call
// of an armed operation, once, so the SDK's retryer sends it again.
type responseLoser struct {
	armed atomic.Pointer[string]
}

func (l *responseLoser) arm(op string) { l.armed.Store(&op) }

func (l *responseLoser) apiOption(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("idemkitResponseLoser",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			op := l.armed.Load()
			if err == nil && op != nil && *op == awsmiddleware.GetOperationName(ctx) && l.armed.CompareAndSwap(op, nil) {
				return middleware.FinalizeOutput{}, md, lostResponse{}
			}
			return out, md, err
		}), middleware.After)
}
