// Command bootstrap is the receipts function's Lambda entry point, built for
// the provided.al2023 runtime as build/receipts/bootstrap.
//
// Environment: IDEMPOTENCY_TABLE (required; the function exits at start-up,
// logging that it is missing), AWS_LAMBDA_LOG_LEVEL (optional), and the
// SDK's usual variables (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, ...). The
// receipts are "sent" by receipts.LocalMailer, which logs one line per
// receipt: a sample's stand-in for an e-mail API.
// Build:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
//		-o build/receipts/bootstrap ./functions/receipts/cmd/bootstrap
package main
