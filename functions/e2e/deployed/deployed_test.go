package deployed_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/e2e/deployed"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
)

// TestDeployed runs the suite against a deployed stack: LocalStack after
// `make deploy-local` (make test-local), or AWS. It needs IDEMKIT_STACK_OUTPUTS
// and the SDK's usual configuration (AWS_ENDPOINT_URL for LocalStack).
func TestDeployed(t *testing.T) {
	path := os.Getenv(e2e.StackOutputsEnv)
	if path == "" {
		t.Skip(e2e.StackOutputsEnv + " is not set: run make deploy-local && make test-local")
	}
	outputs, err := e2e.ReadStackOutputs(path)
	require.NoError(t, err)
	cfg, err := config.LoadDefaultConfig(context.Background())
	require.NoError(t, err)
	lambdaClient := awslambda.NewFromConfig(cfg)
	e2e.Run(t, e2e.Target{
		Payments: deployed.LambdaInvoker(lambdaClient, outputs.PaymentsFunctionName),
		Orders:   deployed.LambdaInvoker(lambdaClient, outputs.OrdersFunctionName),
		State: e2e.DynamoState{
			Client: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }),
			Tables: outputs.Tables(),
		},
		// Through the real queue and event source mapping too. A duplicate
		// that found its order in progress elsewhere is redelivered after the
		// visibility timeout (180 s), so the inventory is checked again after
		// that: a redelivery that reserved twice would show. The poison and
		// invalid messages stay on the queue until they reach the dead-letter
		// queue (5 receives): the suite does not wait for that.
		Queue:       deployed.SQSSender(sqs.NewFromConfig(cfg), outputs.QueueURL),
		QueueWait:   2 * time.Minute,
		QueueSettle: 200 * time.Second,
	})
}

// fakeSQS answers SendMessageBatch (AWS JSON 1.0) by handing the bodies to
// deliver, as a queue and its event source mapping would, and refuses any
// entry whose body is "refuse-me".
func fakeSQS(t *testing.T, deliver e2e.QueueSender) *sqs.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if target := r.Header.Get("X-Amz-Target"); target != "AmazonSQS.SendMessageBatch" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"__type":"UnsupportedOperation","message":"%s"}`, target)
			return
		}
		var in struct {
			QueueURL string `json:"QueueUrl"`
			Entries  []struct{ Id, MessageBody string }
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.QueueURL != "http://queue.local/orders" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"__type":"InvalidParameterValue","message":"bad request for %q: %v"}`, in.QueueURL, err)
			return
		}
		type ok struct{ Id, MessageId, MD5OfMessageBody string }
		type refused struct {
			Id, Code, Message string
			SenderFault       bool
		}
		out := struct {
			Successful []ok
			Failed     []refused
		}{Successful: []ok{}, Failed: []refused{}}
		var bodies []string
		for i, e := range in.Entries {
			if e.MessageBody == "refuse-me" {
				out.Failed = append(out.Failed, refused{Id: e.Id, Code: "InvalidMessageContents", Message: "refused", SenderFault: true})
				continue
			}
			sum := md5.Sum([]byte(e.MessageBody))
			out.Successful = append(out.Successful, ok{Id: e.Id, MessageId: fmt.Sprintf("m-%d", i), MD5OfMessageBody: hex.EncodeToString(sum[:])})
			bodies = append(bodies, e.MessageBody)
		}
		if err := deliver(r.Context(), bodies); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, `{"__type":"InternalError","message":%q}`, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  aws.AnonymousCredentials{},
	})
}

// fakeLambda answers the Lambda Invoke API by running the sample functions in
// process, so the deployed-stack driver is exercised on every run.
func fakeLambda(t *testing.T, functions map[string]e2e.Invoker) *awslambda.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// POST /2015-03-31/functions/{name}/invocations
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions/"), "/invocations")
		invoke, ok := functions[name]
		if !ok {
			w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"Type":"User","message":"Function not found: %s"}`, name)
			return
		}
		event, _ := io.ReadAll(r.Body)
		out, err := invoke(r.Context(), event)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			out, _ = json.Marshal(map[string]string{"errorMessage": err.Error()})
		}
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return awslambda.New(awslambda.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  aws.AnonymousCredentials{},
	})
}

func TestLambdaInvokerAgainstFakeLambda(t *testing.T) {
	t.Parallel()
	store := idempotent.NewMemoryStore()
	tables := &e2e.MemoryTables{}
	client := fakeLambda(t, map[string]e2e.Invoker{
		"payments-fn": e2e.LocalInvoker(payments.New(store, &payments.LocalProcessor{}, tables, "payments"), e2e.PaymentsTimeout),
		"orders-fn":   e2e.LocalInvoker(orders.New(store, tables, "inventory"), e2e.OrdersTimeout),
		"failing-fn":  func(context.Context, []byte) ([]byte, error) { return nil, fmt.Errorf("boom") },
	})
	queue := &e2e.LocalQueue{Orders: deployed.LambdaInvoker(client, "orders-fn"), BatchSize: 10, MaxReceives: 5}
	sender := deployed.SQSSender(fakeSQS(t, queue.Send), "http://queue.local/orders")
	e2e.Run(t, e2e.Target{
		Payments: deployed.LambdaInvoker(client, "payments-fn"),
		Orders:   deployed.LambdaInvoker(client, "orders-fn"),
		State:    tables,
		Queue:    sender,
	})
	t.Cleanup(func() { assert.Len(t, queue.DeadLetters(), 4, "the poison and invalid messages, sent twice") })

	// 23 messages take three SendMessageBatch calls, all delivered (and, not
	// being orders, dead-lettered); a refused entry is an error.
	other := &e2e.LocalQueue{Orders: deployed.LambdaInvoker(client, "orders-fn"), MaxReceives: 1}
	send := deployed.SQSSender(fakeSQS(t, other.Send), "http://queue.local/orders")
	bodies := make([]string, 23)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("not json %d", i)
	}
	require.NoError(t, send(context.Background(), bodies))
	assert.Equal(t, bodies, other.DeadLetters())
	assert.ErrorContains(t, send(context.Background(), []string{"not json", "refuse-me"}), "1 of 2 messages refused, first: InvalidMessageContents")
	_, err := deployed.LambdaInvoker(client, "failing-fn")(context.Background(), []byte(`{}`))
	assert.ErrorContains(t, err, "Unhandled")
	_, err = deployed.LambdaInvoker(client, "missing-fn")(context.Background(), []byte(`{}`))
	assert.ErrorContains(t, err, "missing-fn")
}

func TestReadStackOutputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	good := write("good.json", `{"Idemkit":{"PaymentsFunctionName":"p","OrdersFunctionName":"o","IdempotencyTableName":"i","PaymentsTableName":"pt","InventoryTableName":"it","ApiUrl":"http://x","QueueUrl":"http://q"}}`)
	o, err := e2e.ReadStackOutputs(good)
	require.NoError(t, err)
	assert.Equal(t, "i", o.Tables().Idempotency)
	assert.Equal(t, "it", o.Tables().Inventory)
	assert.Equal(t, "http://q", o.QueueURL)

	for name, body := range map[string]string{
		"other-stack.json": `{"Other":{}}`,
		"missing.json":     `{"Idemkit":{"PaymentsFunctionName":"p"}}`,
		"garbage.json":     `not json`,
	} {
		_, err := e2e.ReadStackOutputs(write(name, body))
		assert.Error(t, err, name)
	}
	_, err = e2e.ReadStackOutputs(filepath.Join(dir, "absent.json"))
	assert.Error(t, err)
}
