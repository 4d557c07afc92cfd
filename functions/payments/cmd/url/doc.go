// Command url is the payments API on a Lambda Function URL: the same
// payments logic as ../bootstrap, served as a net/http handler
// (payments.NewURLHandler: nethttp.Middleware in front of
// payments.NewHTTPHandler) through aws-lambda-go's lambdaurl, built for the
// provided.al2023 runtime as build/payments-url/bootstrap.
//
// The Function URL must use IAM auth (AuthType AWS_IAM): each
// Idempotency-Key is scoped to the IAM identity that signed the request, and
// a request without one is answered 403. lambdaurl needs the URL's invoke
// mode RESPONSE_STREAM; the middleware buffers each response until its
// record is stored, so the client still gets it whole. The CDK stack in
// infra/ deploys it that way (infra/functionurl.go).
//
// Environment: IDEMPOTENCY_TABLE and PAYMENTS_TABLE (required; the function
// exits at start-up, logging which is missing), AWS_LAMBDA_LOG_LEVEL
// (optional), and the SDK's usual variables (AWS_REGION,
// AWS_ENDPOINT_URL_DYNAMODB, ...). Build:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
//		-o build/payments-url/bootstrap ./functions/payments/cmd/url
package main
