package main

import (
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
)

// paymentsURLAsset is the folder under the assets dir with the Function URL
// sample's bootstrap (make build: build/payments-url/bootstrap, from
// functions/payments/cmd/url).
const paymentsURLAsset = "payments-url"

// newPaymentsURL defines the Function URL sample: the payments API once
// more, as a net/http handler behind nethttp.Middleware served by
// aws-lambda-go's lambdaurl, on a Lambda Function URL of its own. It shares
// the idempotency and ledger tables with the payments function, with the
// same least-privilege grants; its keys are scoped to the IAM caller, so the
// two front doors never answer each other's requests.
//
// The URL uses IAM auth: Lambda checks each request's SigV4 signature and
// the caller's lambda:InvokeFunctionUrl permission before the function runs,
// and hands the function the signed caller (requestContext.authorizer.iam),
// which scopes the caller's Idempotency-Keys. No resource policy is added,
// so only principals of this account whose own policies allow it can call
// the URL; a public URL (auth type NONE) would leave every caller in one key
// space. The invoke mode is RESPONSE_STREAM, the one lambdaurl speaks; the
// middleware still buffers each response until its record is stored.
func newPaymentsURL(scope constructs.Construct, assetsDir string, arch awslambda.Architecture, idempotency, payments awsdynamodb.Table) awslambda.Function {
	fn := newFunction(scope, functionSpec{
		id:          "PaymentsUrl",
		asset:       filepath.Join(assetsDir, paymentsURLAsset),
		description: "idemkit sample: POST /payments as net/http on a Function URL (IAM auth), idempotent by Idempotency-Key",
		// The same work as the payments function, so the same timeout and
		// lease arithmetic (stack.go).
		timeout: paymentsTimeout,
		arch:    arch,
		tables: []tableAccess{
			{spec: idempotencyTable, table: idempotency, actions: idempotencyActions},
			{spec: paymentsTable, table: payments, actions: paymentsActions},
		},
	})
	url := fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType:   awslambda.FunctionUrlAuthType_AWS_IAM,
		InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM,
	})
	output(scope, "PaymentsFunctionUrl", url.Url(),
		"Function URL of the net/http payments sample (IAM auth: sign requests with SigV4, service lambda); the route is POST {PaymentsFunctionUrl}payments")
	output(scope, "PaymentsUrlFunctionName", fn.FunctionName(), "Name of the Function URL payments function")
	return fn
}
