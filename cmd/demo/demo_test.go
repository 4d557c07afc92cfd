package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/localddb"
)

// TestDemo runs the whole demo against the local DynamoDB: it must tell
// its story without a single unexpected step, quickly, and leave no table
// behind.
func TestDemo(t *testing.T) {
	client := localddb.TestClient(t)
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	before := tableNames(t, client)

	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	status := run(ctx, &out, false)
	t.Log("\n" + out.String())
	require.Equal(t, 0, status)
	assert.Less(t, time.Since(start), 30*time.Second)

	text := out.String()
	assert.NotContains(t, text, "unexpected")
	for _, want := range []string{
		"Every step turned out as expected",
		"replayed (Idempotent-Replayed: true)",
		"422 payload-mismatch",
		"400 missing-key",
		"batchItemFailures: 3e7c9f4b, 4f8d0a5c",
		"SKU-RED-MUG   3",
	} {
		assert.Contains(t, text, want)
	}
	assert.ElementsMatch(t, before, tableNames(t, client), "the demo deletes its tables")
}

func tableNames(t *testing.T, client *dynamodb.Client) []string {
	t.Helper()
	out, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	var names []string
	for _, n := range out.TableNames {
		if strings.HasPrefix(n, "idemkit-demo") {
			names = append(names, n)
		}
	}
	return names
}

// TestNoEndpoint is not parallel: it changes the environment.
func TestNoEndpoint(t *testing.T) {
	t.Setenv(localddb.EnvEndpoint, "")
	var out bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), &out, false))
	assert.Empty(t, out.String())
}
