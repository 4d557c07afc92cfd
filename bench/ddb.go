package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/localddb"
)

// calls counts DynamoDB API calls: operations as the caller made them, and
// HTTP attempts (more than the operations only if the SDK retried).
type calls struct {
	ops, attempts atomic.Int64

	mu    sync.Mutex
	names []string // operation names in order, when recording
}

func (c *calls) record(op string) {
	c.ops.Add(1)
	if c.names != nil {
		c.mu.Lock()
		c.names = append(c.names, op)
		c.mu.Unlock()
	}
}

type callsKey struct{}

// withCalls makes the calls made under ctx count in c as well. The wrapper
// passes the invocation's context (without its cancellation) to complete and
// release, so c sees every call of one invocation.
func withCalls(ctx context.Context, c *calls) context.Context {
	return context.WithValue(ctx, callsKey{}, c)
}

// countCalls is an SDK middleware that counts every operation (Initialize
// step, once per API call) and every attempt (Finalize step, after the retry
// middleware) in total and in the calls of the request's context.
func countCalls(total *calls) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("idembench/count-ops",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				op := awsmiddleware.GetOperationName(ctx)
				total.record(op)
				if c, ok := ctx.Value(callsKey{}).(*calls); ok {
					c.record(op)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		if err != nil {
			return err
		}
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("idembench/count-attempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				total.attempts.Add(1)
				if c, ok := ctx.Value(callsKey{}).(*calls); ok {
					c.attempts.Add(1)
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// newClient returns a client of the local DynamoDB (AWS_ENDPOINT_URL_DYNAMODB;
// localddb refuses anything else) that counts its calls in total, keeps up to
// conns idle keep-alive connections, and does not validate response CRC32s
// (DynamoDB Local's error responses have none). extra are more middlewares
// for its stack.
func newClient(ctx context.Context, conns int, total *calls, extra ...func(*middleware.Stack) error) (*dynamodb.Client, error) {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = conns
		t.MaxIdleConnsPerHost = conns
		t.IdleConnTimeout = 5 * time.Minute
	})
	return localddb.Client(ctx, func(o *dynamodb.Options) {
		o.HTTPClient = readOnlyBodies{hc}
		o.DisableValidateResponseChecksum = true
		o.APIOptions = append(append(o.APIOptions, countCalls(total)), extra...)
	})
}

// readOnlyBodies sends each request with its body as a plain io.ReadCloser,
// hiding the io.WriterTo of the SDK's body (smithy-go's safe reader). Once
// the SDK has its response it closes that body, and a WriteTo after the
// close returns io.EOF as an error: when net/http's write loop has not yet
// finished the request by then (its copy that checks for bytes past the
// Content-Length), it takes the error for a failed write and closes the
// connection, and the next call dials again. Under callgrind, where every
// goroutine runs 50 times slower, that race was won on 5 to 30 % of calls
// (7 to 47 dials in a phase of 150 invocations, at about 78 k instructions
// each; far fewer without valgrind): the largest source of the spread
// between rounds of §9's and §10's instruction counts, 1.6 % of a round's
// count then, 0.2 % without it. A plain Read after the close returns io.EOF
// too, which io.Copy takes for the end. Wrapped and bare drivers share the
// client, so both pay the one wrapper per call.
type readOnlyBodies struct{ c *awshttp.BuildableClient }

// Do implements the SDK's HTTPClient.
func (c readOnlyBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readOnlyBody{r.Body}
	}
	return c.c.Do(r)
}

// readOnlyBody is an io.ReadCloser and nothing else.
type readOnlyBody struct{ io.ReadCloser }

// createTable creates an idempotency table (partition key id, TTL on
// expiration: the layout both idemkit and Powertools use) with a name unique
// to this run.
func createTable(ctx context.Context, client *dynamodb.Client, purpose string) (string, error) {
	name := "idembench-" + purpose + "-" + randomHex(4)
	err := localddb.CreateTable(ctx, client, localddb.Table{Name: name, PartitionKey: "id", TTLAttribute: "expiration"})
	return name, err
}

func deleteTable(client *dynamodb.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = localddb.DeleteTable(ctx, client, name)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
