package apigateway

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

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
	n := len(kind)
	for _, p := range parts {
		n += len("::") + 20 + len(p) // 20: the longest length
	}
	var b strings.Builder
	b.Grow(n) // one allocation
	b.WriteString(kind)
	var num [20]byte
	for _, p := range parts {
		b.WriteByte(':')
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// maxExactInt bounds the integers accepted as caller ids: a float64 (what a
// JSON number decodes to) tells every integer of smaller magnitude apart,
// but 2^53 and 2^53+1 decode the same.
const maxExactInt = 1 << 53

// scalarString renders an authorizer context value that names a caller,
// with its kind ("s" string, "n" integer, "b" boolean) so that "1" and 1 are
// different callers. ok is false for a missing or empty value, a number that
// is not an integer of magnitude below 2^53, and any other type.
func scalarString(v any) (kind, s string, ok bool) {
	switch v := v.(type) {
	case string:
		return "s", v, v != ""
	case float64:
		if v != math.Trunc(v) || math.Abs(v) >= maxExactInt {
			return "", "", false
		}
		return "n", strconv.FormatInt(int64(v), 10), true
	case int:
		return scalarString(int64(v))
	case int64:
		if v >= maxExactInt || v <= -maxExactInt {
			return "", "", false
		}
		return "n", strconv.FormatInt(v, 10), true
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return "", "", false
		}
		return scalarString(n)
	case bool:
		return "b", strconv.FormatBool(v), true
	}
	return "", "", false
}
