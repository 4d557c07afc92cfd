package localddb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table describes a table to create: on-demand billing, a string partition
// key, optionally a string sort key and time to live.
type Table struct {
	// Name is the table name.
	Name string
	// PartitionKey is the name of the partition key attribute (type S).
	PartitionKey string
	// SortKey is the name of the sort key attribute (type S), or "" for none.
	SortKey string
	// TTLAttribute is the attribute time to live reads, or "" for no TTL.
	TTLAttribute string
}

// Tables names the sample stack's three tables. Their schemas are those of
// infra/tables.go and localstack/ready.d/10-tables.sh.
type Tables struct {
	// Idempotency holds the idempotency records: partition key id (S), TTL
	// on expiration.
	Idempotency string
	// Payments is the payments ledger: partition key paymentId (S).
	Payments string
	// Inventory holds the stock reservations: partition key sku (S).
	Inventory string
}

// Specs returns the definitions of the three tables, in the order
// idempotency, payments, inventory.
func (n Tables) Specs() []Table {
	return []Table{
		{Name: n.Idempotency, PartitionKey: "id", TTLAttribute: "expiration"},
		{Name: n.Payments, PartitionKey: "paymentId"},
		{Name: n.Inventory, PartitionKey: "sku"},
	}
}

// maxPrefix leaves room for the random suffix and the longest table suffix
// within DynamoDB's 255-character table names.
const maxPrefix = 200

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// UniqueTables returns table names that no other call returns: prefix (made
// safe for table names, so a test name will do), a random suffix, and
// -idempotency, -payments or -inventory.
func UniqueTables(prefix string) Tables {
	prefix = strings.Trim(unsafeChars.ReplaceAllString(prefix, "-"), "-")
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	if prefix == "" {
		prefix = "idemkit"
	}
	var b [5]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	base := prefix + "-" + hex.EncodeToString(b[:])
	return Tables{Idempotency: base + "-idempotency", Payments: base + "-payments", Inventory: base + "-inventory"}
}

// CreateTables creates the three tables at once and waits until they are
// active, with TTL enabled on the idempotency table.
func CreateTables(ctx context.Context, client *dynamodb.Client, names Tables) error {
	specs := names.Specs()
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, t := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = CreateTable(ctx, client, t)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DeleteTables deletes the three tables; tables that do not exist are not an
// error. It does not wait for the deletions to finish.
func DeleteTables(ctx context.Context, client *dynamodb.Client, names Tables) error {
	var errs []error
	for _, t := range names.Specs() {
		errs = append(errs, DeleteTable(ctx, client, t.Name))
	}
	return errors.Join(errs...)
}

// CreateTable creates an on-demand table, waits until it is active and
// enables its time to live, if it has one.
func CreateTable(ctx context.Context, client *dynamodb.Client, t Table) error {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(t.Name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(t.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(t.PartitionKey), KeyType: types.KeyTypeHash}},
	}
	if t.SortKey != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(t.SortKey), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(t.SortKey), KeyType: types.KeyTypeRange})
	}
	if _, err := client.CreateTable(ctx, in); err != nil {
		return fmt.Errorf("localddb: create table %s: %w", t.Name, err)
	}
	// DynamoDB Local creates tables active; LocalStack and AWS take a moment.
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)}, 2*time.Minute); err != nil {
		return fmt.Errorf("localddb: wait for table %s: %w", t.Name, err)
	}
	if t.TTLAttribute == "" {
		return nil
	}
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(t.Name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(t.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("localddb: enable TTL on %s: %w", t.Name, err)
	}
	return nil
}

// DeleteTable deletes a table; a table that does not exist is not an error.
func DeleteTable(ctx context.Context, client *dynamodb.Client, name string) error {
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("localddb: delete table %s: %w", name, err)
	}
	return nil
}
