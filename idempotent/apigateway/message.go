package apigateway

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// requestError says why an event was refused as malformed. Its reason is
// safe to show the client.
type requestError struct{ reason string }

func (e *requestError) Error() string { return "apigateway: " + e.reason }

// errNoMethod refuses an event without an HTTP method: not an API Gateway
// proxy request of the payload version the handler was wrapped for (a
// payload 2.0 event given to WrapV1 has none, and the reverse), so whether
// it needs an Idempotency-Key cannot be told.
var errNoMethod = &requestError{"the event carries no HTTP method: it is not an API Gateway proxy request of the payload format version this function expects"}

// response is an API Gateway proxy response of either payload version, and
// the form in which a response is stored (its JSON is the record's data, so
// field names are a stored format: add fields, never rename them).
//
// Body is a Go string, as in the events package: a body that is not valid
// UTF-8 must be sent base64-encoded, or the JSON encoding of the response
// (by aws-lambda-go as by the store) replaces its invalid bytes.
type response struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers,omitempty"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	Cookies           []string            `json:"cookies,omitempty"`
	Body              string              `json:"body,omitempty"`
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`
}

// headerValues returns the values of header name, matched case-insensitively:
// those in multi when it holds the name (API Gateway's multiValueHeaders),
// else those in single. Names that differ only in case (possible in
// hand-written events) are read in sorted order, so the result is stable.
func headerValues(single map[string]string, multi map[string][]string, name string) []string {
	var names []string
	for k := range multi {
		if strings.EqualFold(k, name) {
			names = append(names, k)
		}
	}
	var out []string
	if len(names) > 0 {
		slices.Sort(names)
		for _, k := range names {
			out = append(out, multi[k]...)
		}
		return out
	}
	for k := range single {
		if strings.EqualFold(k, name) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		out = append(out, single[k])
	}
	return out
}

func firstValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// canonicalQuery sorts query parameters by name, keeping the order of a
// name's values (it may carry meaning, as in a list), and escapes them
// uniformly: "b=2&a=1" and "a=1&b=2" are the same query.
func canonicalQuery(values url.Values) string {
	return values.Encode()
}

// canonicalRawQuery is canonicalQuery of a raw query string; one that does
// not parse counts as given.
func canonicalRawQuery(raw string) string {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return "\x00raw\x00" + raw
	}
	return canonicalQuery(values)
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
