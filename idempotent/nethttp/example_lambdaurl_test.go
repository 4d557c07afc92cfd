package nethttp_test

// A Lambda function behind a Function URL. It is compiled, not run:
// lambdaurl.Start serves invocations only inside Lambda.

import (
	"context"
	"errors"
	"log"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// functionURLCaller names the signed caller of a Function URL with IAM auth
// (AuthType AWS_IAM), so each caller's keys are its own.
func functionURLCaller(r *http.Request) (string, error) {
	ev, ok := lambdaurl.RequestFromContext(r.Context())
	if !ok || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM == nil {
		return "", errors.New("not a Function URL request with IAM auth")
	}
	iam := ev.RequestContext.Authorizer.IAM
	if iam.UserARN != "" {
		return "iam:" + iam.UserARN, nil
	}
	return "iam-caller:" + iam.AccountID + ":" + iam.CallerID, nil
}

// The same net/http handlers on a Lambda Function URL (lambdaurl needs the
// URL's invoke mode RESPONSE_STREAM); the middleware buffers each response
// until its record is stored, so streaming changes nothing for the client.
func Example_lambdaurl() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	idem := nethttp.Middleware(idempotent.New(store), nethttp.WithScope(functionURLCaller))

	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Charge, passing idempotent.DownstreamKey(r.Context()) to the payment provider.
		w.WriteHeader(http.StatusCreated)
	})))
	lambdaurl.Start(mux)
}
