package localddbtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/localddb"
)

// Require skips the test when no local DynamoDB endpoint is set, or fails it
// when IDEMKIT_REQUIRE_DYNAMODB=1.
func Require(t testing.TB) {
	t.Helper()
	if localddb.Endpoint() != "" {
		return
	}
	if os.Getenv(localddb.EnvRequire) == "1" {
		t.Fatal(localddb.EnvRequire + "=1 but " + localddb.EnvEndpoint + " is not set")
	}
	t.Skip(localddb.EnvEndpoint + " is not set (run under scripts/with-dynamodb.sh)")
}

// Client is Require followed by localddb.Client: it returns a client for
// the local DynamoDB, or skips (or fails) t when there is none.
func Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	Require(t)
	client, err := localddb.Client(context.Background(), optFns...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return client
}

// Tables creates the three tables under names unique to t and deletes them
// when t ends. It fails t if they cannot be created.
func Tables(t testing.TB, client *dynamodb.Client) localddb.Tables {
	t.Helper()
	names := localddb.UniqueTables(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := localddb.DeleteTables(ctx, client, names); err != nil {
			t.Errorf("%v", err)
		}
	})
	if err := localddb.CreateTables(ctx, client, names); err != nil {
		t.Fatalf("%v", err)
	}
	return names
}
