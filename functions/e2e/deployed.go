package e2e

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/idemkit/idemkit/internal/localddb"
)

// StackOutputsEnv names the environment variable holding the path of the
// outputs file `cdk deploy --outputs-file` wrote (make deploy-local writes
// infra/cdk-outputs.local.json). When it is set, the suite runs against that
// deployed stack.
const StackOutputsEnv = "IDEMKIT_STACK_OUTPUTS"

// StackOutputs are the outputs of the Idemkit stack the suite needs.
type StackOutputs struct {
	// PaymentsFunctionName is the deployed payments function.
	PaymentsFunctionName string
	// OrdersFunctionName is the deployed orders function.
	OrdersFunctionName string
	// IdempotencyTableName holds the idempotency records.
	IdempotencyTableName string
	// PaymentsTableName is the payments ledger.
	PaymentsTableName string
	// InventoryTableName holds the stock reservations.
	InventoryTableName string
	// QueueURL is the orders queue (output QueueUrl).
	QueueURL string `json:"QueueUrl"`
}

// Tables returns the stack's table names.
func (o StackOutputs) Tables() localddb.Tables {
	return localddb.Tables{Idempotency: o.IdempotencyTableName, Payments: o.PaymentsTableName, Inventory: o.InventoryTableName}
}

// ReadStackOutputs reads the outputs of the stack named "Idemkit" from a file
// written by `cdk deploy --outputs-file`, and checks that none is missing.
func ReadStackOutputs(path string) (StackOutputs, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return StackOutputs{}, fmt.Errorf("e2e: stack outputs: %w", err)
	}
	var stacks map[string]StackOutputs
	if err := json.Unmarshal(b, &stacks); err != nil {
		return StackOutputs{}, fmt.Errorf("e2e: stack outputs %s: %w", path, err)
	}
	o, ok := stacks["Idemkit"]
	if !ok {
		return StackOutputs{}, fmt.Errorf("e2e: stack outputs %s: no stack named Idemkit", path)
	}
	for name, v := range map[string]string{
		"PaymentsFunctionName": o.PaymentsFunctionName, "OrdersFunctionName": o.OrdersFunctionName,
		"IdempotencyTableName": o.IdempotencyTableName, "PaymentsTableName": o.PaymentsTableName,
		"InventoryTableName": o.InventoryTableName, "QueueUrl": o.QueueURL,
	} {
		if v == "" {
			return StackOutputs{}, fmt.Errorf("e2e: stack outputs %s: %s is missing", path, name)
		}
	}
	return o, nil
}
