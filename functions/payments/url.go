package payments

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// ProblemUnsigned: 403, the request did not come through a Lambda Function
// URL with IAM auth (AuthType AWS_IAM), so it names no signed caller to
// scope its Idempotency-Key to. Lambda itself refuses unsigned requests to
// such a URL; this answer means the URL's auth type is NONE, or the function
// was invoked some other way.
const ProblemUnsigned = "https://idemkit.dev/problems/payments/unsigned-request"

// NewURLHandler returns the payments API as the Function URL sample serves
// it with lambdaurl.Start: NewHTTPHandler behind nethttp.Middleware on
// Engine(store, opts...), the Lambda function's settings (prefix Prefix,
// expiry Expiry) and then opts, which can add, for example,
// idempotent.WithOutcomeHook(...). Each key is scoped to the IAM identity
// that signed the request (see URLCaller); a request without one is
// answered 403 (ProblemUnsigned) before the middleware sees it.
func NewURLHandler(store storage.Store, processor Processor, ledger Ledger, table string, opts ...idempotent.Option) http.Handler {
	idem := nethttp.Middleware(Engine(store, opts...), nethttp.WithScope(callerScope))(NewHTTPHandler(processor, ledger, table))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, err := URLCaller(r.Context())
		if err != nil {
			writeResponse(w, problemResponse(problem{
				Type:   ProblemUnsigned,
				Title:  "Request not signed",
				Status: http.StatusForbidden,
				Detail: "This endpoint serves only requests signed with AWS Signature Version 4 through its Function URL (IAM auth).",
			}))
			return
		}
		// The middleware's WithScope reads the caller from here, as it
		// would read what any authentication middleware found.
		idem.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller)))
	})
}

// errUnsigned says a request carries no IAM caller.
var errUnsigned = errors.New("payments: not a Function URL request with IAM auth")

// URLCaller names the IAM identity that signed a Function URL request (the
// requestContext.authorizer.iam that lambdaurl.RequestFromContext returns):
// "iam:" and its user or role-session ARN, or, for a caller Lambda gives no
// ARN, "iam-caller:" and its account and caller id. It returns an error for
// a request without that context: not served by lambdaurl, or from a URL
// whose auth type is NONE.
func URLCaller(ctx context.Context) (string, error) {
	ev, ok := lambdaurl.RequestFromContext(ctx)
	if !ok || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM == nil {
		return "", errUnsigned
	}
	iam := ev.RequestContext.Authorizer.IAM
	switch {
	case iam.UserARN != "":
		return "iam:" + iam.UserARN, nil
	case iam.CallerID != "":
		return "iam-caller:" + iam.AccountID + ":" + iam.CallerID, nil
	}
	return "", errUnsigned
}

type callerKey struct{}

// callerScope is the middleware's WithScope: the caller NewURLHandler found.
func callerScope(r *http.Request) (string, error) {
	if c, ok := r.Context().Value(callerKey{}).(string); ok {
		return c, nil
	}
	return "", errUnsigned
}
