package main

// TableSpec is the one definition of a DynamoDB table of the sample stack.
// NewIdemkitStack builds each table from it, and localstack_test.go checks
// that the LocalStack init hook (../localstack/ready.d/10-tables.sh) creates
// the same tables, so a local run never tests against a different schema.
//
// Every table is billed on demand (PAY_PER_REQUEST) and has a single string
// (S) partition key and no sort key or secondary index: the functions only
// read and write items by key.
type TableSpec struct {
	// ID is the construct ID in the stack; the CloudFormation logical ID
	// starts with it and the stack output of the table's name is ID+"Name".
	ID string
	// EnvVar is the environment variable that passes the table's name to the
	// functions that use it.
	EnvVar string
	// LocalName is the fixed table name the LocalStack init hook uses. On AWS
	// CloudFormation names the tables, so two stacks can share an account.
	LocalName string
	// PartitionKey is the name of the string (S) partition key.
	PartitionKey string
	// TTLAttribute is the attribute DynamoDB's time to live reads (epoch
	// seconds), or "" when the table has no TTL.
	TTLAttribute string
	// StreamView is the view type of the table's DynamoDB stream
	// (NEW_AND_OLD_IMAGES, ...), or "" when the table has no stream.
	StreamView string
}

// The tables. Their names and attributes are shared with the functions
// (environment variables) and the idempotency store (its defaults match
// Powertools: partition key "id", TTL attribute "expiration").
var (
	idempotencyTable = TableSpec{
		ID:           "IdempotencyTable",
		EnvVar:       "IDEMPOTENCY_TABLE",
		LocalName:    "idemkit-idempotency",
		PartitionKey: "id",
		TTLAttribute: "expiration",
	}
	paymentsTable = TableSpec{
		ID:           "PaymentsTable",
		EnvVar:       "PAYMENTS_TABLE",
		LocalName:    "idemkit-payments",
		PartitionKey: "paymentId",
		// The receipts function reads the new image of each payment; the old
		// one shows what a change changed, for any later consumer.
		StreamView: "NEW_AND_OLD_IMAGES",
	}
	inventoryTable = TableSpec{
		ID:           "InventoryTable",
		EnvVar:       "INVENTORY_TABLE",
		LocalName:    "idemkit-inventory",
		PartitionKey: "sku",
	}
)

// Tables returns the definitions of the stack's three tables: idempotency,
// payments ledger, inventory, in that order. The slice is a fresh copy.
func Tables() []TableSpec {
	return []TableSpec{idempotencyTable, paymentsTable, inventoryTable}
}
