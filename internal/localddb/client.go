package localddb

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Environment variables read by this package.
const (
	// EnvEndpoint is the DynamoDB endpoint, such as http://127.0.0.1:8000. The
	// SDK reads it too (service-specific endpoint configuration), so clients
	// built from it need no endpoint code.
	EnvEndpoint = "AWS_ENDPOINT_URL_DYNAMODB"
	// EnvRequire, when "1", makes localddbtest.Require fail instead of skip without an
	// endpoint. scripts/with-dynamodb.sh sets it, so a broken set-up cannot
	// pass as a run that skipped everything.
	EnvRequire = "IDEMKIT_REQUIRE_DYNAMODB"
)

// ErrNoEndpoint is returned by Client when EnvEndpoint is not set.
var ErrNoEndpoint = errors.New("localddb: " + EnvEndpoint + " is not set (run under scripts/with-dynamodb.sh)")

// Endpoint returns the local DynamoDB endpoint, or "" when none is set.
func Endpoint() string { return os.Getenv(EnvEndpoint) }

// Client returns a DynamoDB client for the endpoint in AWS_ENDPOINT_URL_DYNAMODB,
// configured the way the SDK's default chain would, with three local
// defaults: region us-east-1 when AWS_REGION and AWS_DEFAULT_REGION are unset,
// credentials test/test when AWS_ACCESS_KEY_ID is unset, and no response
// checksum validation (DynamoDB Local's error responses lack the CRC32
// header the SDK checks). optFns are applied last. It returns ErrNoEndpoint
// when no endpoint is set, rather than fall back to AWS.
func Client(ctx context.Context, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	if Endpoint() == "" {
		return nil, ErrNoEndpoint
	}
	var loadOpts []func(*config.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		loadOpts = append(loadOpts, config.WithRegion("us-east-1"))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("localddb: load AWS config: %w", err)
	}
	endpoint := Endpoint()
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		// Set explicitly although the SDK reads the same variable: with
		// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true it would not, and this
		// client must never reach AWS.
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	}}, optFns...)...), nil
}
