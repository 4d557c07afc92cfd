package apigateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// RecordID returns the id of the record WrapV1 and WrapV2 (and nethttp.Middleware
// behind HandlerV1 or HandlerV2, scoped by the door) keep for a request
// whose Idempotency-Key header is key, exactly as sent (a bare token or an
// RFC 8941 string, quotes included), from the caller named by kind and parts,
// under prefix (the core's: idempotent.WithPrefix, by default the function's
// name). It is for tools, such as the idemkit command, that must find a record
// from the raw key and caller of a support ticket: the caller encoding stays
// the adapter's own, so the two cannot drift apart.
//
//	kind            parts                          the request was authorized by
//	jwt             issuer, subject                a JWT (HTTP API) or Cognito user pool (REST) authorizer
//	jwt-client      issuer, client_id              the same, for a token without a subject
//	lambda          principalId                    a Lambda authorizer
//	lambda-context  field, value as JSON           a Lambda authorizer, under WithAuthorizerCaller(field)
//	cognito         identity pool id, identity id  IAM, through a Cognito identity pool
//	iam             user ARN                       IAM
//	iam-caller      account id, caller id          IAM, without a user ARN
//	apikey          API key id                     an API key (REST APIs)
//	anonymous       (none)                         nothing: no authenticated caller
//
// A lambda-context value is JSON because the type counts: "42" (a string)
// and 42 (a number) are different callers. An invalid key, an unknown kind or
// the wrong number of parts is an error.
func RecordID(prefix, key, kind string, parts ...string) (string, error) {
	k, err := nethttp.ParseKey([]string{key})
	if err != nil {
		return "", fmt.Errorf("apigateway: RecordID: %w", err)
	}
	if k == "" {
		return "", errors.New("apigateway: RecordID: the Idempotency-Key header is empty")
	}
	want := map[string]int{callerJWT: 2, callerJWTClient: 2, callerLambda: 1, callerLambdaCtx: 2,
		callerCognito: 2, callerIAM: 1, callerIAMCaller: 2, callerAPIKey: 1, anonymous: 0}
	n, ok := want[kind]
	switch {
	case !ok:
		return "", fmt.Errorf("apigateway: RecordID: unknown caller kind %q (want jwt, jwt-client, lambda, "+
			"lambda-context, cognito, iam, iam-caller, apikey or anonymous)", kind)
	case len(parts) != n:
		return "", fmt.Errorf("apigateway: RecordID: caller kind %q takes %d parts, not %d", kind, n, len(parts))
	}
	var scope string
	switch kind {
	case anonymous:
		scope = anonymous
	case callerLambdaCtx:
		d := json.NewDecoder(strings.NewReader(parts[1]))
		var v any
		if err := d.Decode(&v); err != nil || d.More() {
			return "", fmt.Errorf("apigateway: RecordID: lambda-context value %q is not one JSON value", parts[1])
		}
		vk, s, ok := scalarString(v)
		if !ok {
			return "", fmt.Errorf("apigateway: RecordID: lambda-context value %s is not a non-empty string, "+
				"an integer of magnitude below 2^53 or a boolean", parts[1])
		}
		scope = principal(callerLambdaCtx, parts[0], vk, s)
	default:
		scope = principal(kind, parts...)
	}
	return idempotent.RecordID(prefix, scope, k), nil
}
