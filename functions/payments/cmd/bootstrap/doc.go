// Command bootstrap is the payments function's Lambda entry point, built
// for the provided.al2023 runtime as build/payments/bootstrap.
//
// Environment: IDEMPOTENCY_TABLE and PAYMENTS_TABLE (required; the function exits at
// start-up, logging which is missing), AWS_LAMBDA_LOG_LEVEL (optional), and
// the SDK's usual variables (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, ...).
// Build:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
//		-o build/payments/bootstrap ./functions/payments/cmd/bootstrap
package main
