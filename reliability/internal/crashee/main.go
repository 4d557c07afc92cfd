// Command crashee runs one invocation of the payments sample function against
// DynamoDB Local (AWS_ENDPOINT_URL_DYNAMODB), for the crash and pause tests
// of package reliability, which kill it with SIGKILL or pause it with SIGSTOP
// at a chosen point.
//
// The invocation goes through lambda.NewHandler(...).Invoke, as lambda.Start
// would deliver it, with the payments function built as its main package
// builds it (dynamostore on the idempotency table, the ledger on the payments
// table), plus the test's lease, clock-skew margin and clock offset.
//
// The function charges through its processor as a step (recorded in the
// idempotency record) and writes its ledger row in the completion's
// transaction. With -after-write other than "return", the invocation stops
// when that transaction is about to be sent (the charge is done and
// recorded; nothing of the completion is written): "READY <paymentId>
// <processorKey>" (from the ledger row in the transaction) is printed and the
// invocation blocks: "hang" for good (until killed), "stdin" until a line
// arrives on standard input, after which the transaction is sent as if
// nothing had happened. At the end "RESPONSE <json>" is printed. Standard
// output carries only these lines; the function's JSON logs go to standard
// error.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/internal/localddb"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

func main() {
	var (
		idemTable  = flag.String("idempotency-table", "", "idempotency table")
		payTable   = flag.String("payments-table", "", "payments (ledger) table")
		key        = flag.String("key", "", "Idempotency-Key header")
		customer   = flag.String("customer", "cus_crashee", "customerId of the body")
		lease      = flag.Duration("lease", 2*time.Second, "idempotent.WithMaxLease")
		skew       = flag.Duration("skew", 100*time.Millisecond, "idempotent.WithClockSkew")
		offset     = flag.Duration("offset", 0, "added to the wrapper's clock (idempotent.WithClock)")
		timeout    = flag.Duration("timeout", e2e.PaymentsTimeout, "the invocation's deadline")
		afterWrite = flag.String("after-write", "return", `before the completion's transaction: "return" (send it), "hang" or "stdin"`)
	)
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := run(*idemTable, *payTable, *key, *customer, *lease, *skew, *offset, *timeout, *afterWrite); err != nil {
		fmt.Fprintln(os.Stderr, "crashee:", err)
		os.Exit(1)
	}
}

func run(idemTable, payTable, key, customer string, lease, skew, offset, timeout time.Duration, afterWrite string) error {
	if idemTable == "" || payTable == "" || key == "" {
		return fmt.Errorf("-idempotency-table, -payments-table and -key are required")
	}
	client, err := localddb.Client(context.Background())
	if err != nil {
		return err
	}
	store := dynamostore.New(&stopBeforeCommit{Client: client, afterWrite: afterWrite, ledgerTable: payTable}, idemTable)
	handler := payments.New(store, &payments.LocalProcessor{}, client, payTable,
		idempotent.WithMaxLease(lease),
		idempotent.WithClockSkew(skew),
		idempotent.WithClock(func() time.Time { return time.Now().Add(offset) }),
	)

	ev, err := samples.HTTP(samples.PaymentNew)
	if err != nil {
		return err
	}
	ev = e2e.WithKey(ev, key)
	body, err := json.Marshal(map[string]any{"customerId": customer, "amount": 2500, "currency": "EUR"})
	if err != nil {
		return err
	}
	ev.Body = string(body)
	delete(ev.Headers, "content-length")
	in, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	out, err := e2e.LocalInvoker(handler, timeout)(context.Background(), in)
	if err != nil {
		return fmt.Errorf("invoke: %w", err)
	}
	fmt.Printf("RESPONSE %s\n", out)
	return nil
}

// stopBeforeCommit is the idempotency table's client, with a stop before the
// completion's transaction (which carries the ledger row).
type stopBeforeCommit struct {
	*dynamodb.Client
	afterWrite  string
	ledgerTable string
}

func (c *stopBeforeCommit) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if c.afterWrite != "return" {
		for _, it := range in.TransactItems {
			if it.Put != nil && it.Put.TableName != nil && *it.Put.TableName == c.ledgerTable {
				fmt.Printf("READY %s %s\n", attr(it.Put.Item, "paymentId"), attr(it.Put.Item, "processorKey"))
			}
		}
		switch c.afterWrite {
		case "hang":
			for {
				time.Sleep(time.Hour)
			}
		case "stdin":
			if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
				return nil, fmt.Errorf("crashee: read stdin: %w", err)
			}
		}
	}
	return c.Client.TransactWriteItems(ctx, in, optFns...)
}

func attr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
