package apigateway

import (
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

// request is what the adapter needs of an API Gateway request, whatever its
// payload version.
type request struct {
	method      string   // upper case
	path        string   // as called
	query       string   // canonical: keys sorted, values in order
	keyValues   []string // the Idempotency-Key header's values
	contentType string
	body        string
	base64      bool
	scope       string         // the caller, see principal
	lambdaAuth  map[string]any // a Lambda authorizer's context, when one authorized the request
}

// errNoMethod refuses an event without an HTTP method: not an API Gateway
// proxy request of the payload version the handler was wrapped for (a
// payload 2.0 event given to WrapV1 has none, and the reverse), so whether
// it needs an Idempotency-Key cannot be told.
var errNoMethod = &httprules.RequestError{Reason: "the event carries no HTTP method: it is not an API Gateway proxy request of the payload format version this function expects"}

// response is an API Gateway proxy response of either payload version, and
// the form in which a response is stored (see httprules.Response).
type response = httprules.Response

func firstValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// Caller kinds of principal; anonymous is the scope of a request that carries
// no authenticated principal.
const (
	callerJWT       = "jwt" // issuer, subject (HTTP API JWT authorizer, REST Cognito user pool)
	callerJWTClient = "jwt-client"
	callerLambda    = "lambda"         // principalId of a Lambda authorizer
	callerLambdaCtx = "lambda-context" // field name, value (WithAuthorizerCaller)
	callerCognito   = "cognito"        // identity pool, identity id (IAM auth through Cognito)
	callerIAM       = "iam"            // user ARN
	callerIAMCaller = "iam-caller"
	callerAPIKey    = "apikey" // API key id
	anonymous       = "anonymous"
)

// principal encodes a caller as its kind followed by length-prefixed parts,
// ("jwt:3:iss:5:alice"), so no two callers share an encoding whatever their
// parts contain.
func principal(kind string, parts ...string) string {
	var b strings.Builder
	b.WriteString(kind)
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// fingerprint is the request material a duplicate must repeat: see
// httprules.Fingerprint. The body is given as sent, base64 or not.
func fingerprint(r *request) ([]byte, error) {
	return httprules.Fingerprint(&httprules.Request{
		Method: r.method, Path: r.path, Query: r.query, ContentType: r.contentType,
		Body: []byte(r.body), Base64: r.base64,
	})
}
