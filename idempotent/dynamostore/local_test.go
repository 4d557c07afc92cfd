package dynamostore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
)

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
	spec := localddb.Table{Name: localddb.UniqueTables(t.Name()).Idempotency, PartitionKey: "id", TTLAttribute: "expiration"}
	if composite {
		spec.PartitionKey, spec.SortKey = "pk", "sk"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := localddb.DeleteTable(ctx, client, spec.Name); err != nil {
			t.Errorf("%v", err)
		}
	})
	require.NoError(t, localddb.CreateTable(ctx, client, spec))
	return spec.Name
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
