package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// The sample functions' own side effects under the same faults: the
// idempotency record is fine (the store uses a client without faults), but
// the write the handler makes has its response lost, so the SDK retries it.

// TestPaymentsLedgerLostResponse: the ledger write reaches DynamoDB, its
// response is lost, and the SDK's retry fails the write's condition
// (attribute_not_exists(paymentId)) on the item the first attempt wrote. One
// request must still make one payment.
func TestPaymentsLedgerLostResponse(t *testing.T) {
	t.Parallel()
	// Was a bug: the retry failed its own condition, the handler answered 500 and
	// released the key, and the client's retry recorded a second payment.
	e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
	invoke := e2e.LocalInvoker(payments.New(dynamostore.New(e.client, e.tables.Idempotency), &payments.LocalProcessor{}, e.faulty, e.tables.Payments), e2e.PaymentsTimeout)
	ev, err := samples.HTTP(samples.PaymentNew)
	require.NoError(t, err)
	in, err := json.Marshal(e2e.NewPersonalize().Payment(ev))
	require.NoError(t, err)

	e.faults.arm("PutItem", lostResponse, 1)
	var answer events.APIGatewayV2HTTPResponse
	for range 3 { // the client retries a 5xx with the same key
		out, err := invoke(context.Background(), in)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(out, &answer))
		if answer.StatusCode < 500 {
			break
		}
	}
	require.Equal(t, http.StatusCreated, answer.StatusCode, answer.Body)
	var p payments.Payment
	require.NoError(t, json.Unmarshal([]byte(answer.Body), &p))
	ledger := e.ledger(t)
	require.Len(t, ledger, 1, "one request, one payment")
	assert.Equal(t, p.PaymentID, ledger[0].PaymentID)
}

// TestOrdersInventoryLostResponse: the inventory UpdateItem (ADD reserved)
// reaches DynamoDB, its response is lost, and the SDK retries it. One order
// must still reserve its quantity once.
func TestOrdersInventoryLostResponse(t *testing.T) {
	t.Parallel()
	// Was a bug: the ADD was applied twice within one run of the handler.
	e := newEnv(t, envOptions{attemptTimeout: 300 * time.Millisecond})
	invoke := e2e.LocalInvoker(orders.New(dynamostore.New(e.client, e.tables.Idempotency), e.faulty, e.tables.Inventory), e2e.OrdersTimeout)
	sku := "SKU-" + newKey(t)
	require.NoError(t, e2e.DynamoState{Client: e.client, Tables: e.tables}.Restock(context.Background(), sku, 10), "the function reserves only what is in stock")
	in, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1",
		Body: fmt.Sprintf(`{"orderId":"o-%s","sku":%q,"quantity":3}`, newKey(t), sku)}}})
	require.NoError(t, err)

	e.faults.arm("UpdateItem", lostResponse, 1)
	out, err := invoke(context.Background(), in)
	require.NoError(t, err)
	var resp events.SQSEventResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Empty(t, resp.BatchItemFailures)
	var reserved int64 = -1
	for _, it := range scanAll(t, e.client, e.tables.Inventory) {
		if str(it, "sku") == sku {
			reserved, err = strconv.ParseInt(num(it, "reserved"), 10, 64)
			require.NoError(t, err)
		}
	}
	assert.Equal(t, int64(3), reserved, "one order, reserved once")
}
