package apigateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
)

// WithAuthorizerCaller names the caller of a request a Lambda authorizer
// authorized by the value of the authorizer context's field (a user or
// tenant id, say) instead of its principalId, for authorizers whose
// principalId is missing or shared: an HTTP API authorizer with simple
// responses passes only its context. Requests authorized otherwise keep
// their callers (see the package documentation, "Caller scoping"). The value
// must be a non-empty string, an integer of magnitude below 2^53, or a
// boolean ("1" and 1 are different callers). A request with an
// Idempotency-Key authorized by a Lambda authorizer whose context lacks the
// field (or holds any other value) is answered 500 without running the
// handler and logged at error level, and a request without a key runs
// (nethttp.ContextWithScopeError): sharing one scope across callers is never
// the fallback. Give it to HandlerV1, HandlerV2, WrapV1 or WrapV2. An empty
// field panics.
func WithAuthorizerCaller(field string) Option {
	if field == "" {
		panic("apigateway: WithAuthorizerCaller: empty field name")
	}
	return func(o *options) { o.field = field }
}

// callers names the callers of a door's events: by their authorizer (see
// scopeV1 and scopeV2), or with field WithAuthorizerCaller's.
type callers struct {
	field string              // WithAuthorizerCaller
	log   func() *slog.Logger // for the shared-scope warning

	sharedScopeWarning sync.Once
}

// name is the scope of an event whose authorizer names scope, with
// lambdaAuth the context of the Lambda authorizer that authorized it (nil
// when none did): scope, or under WithAuthorizerCaller the field of a
// Lambda authorizer's context (an error when the field is missing). shared
// reports a request a Lambda authorizer authorized without a principalId,
// in the anonymous scope: it usually means an authorizer with simple
// responses (see warnShared).
func (c *callers) name(scope string, lambdaAuth map[string]any) (_ string, shared bool, _ error) {
	if lambdaAuth == nil {
		return scope, false, nil
	}
	if c.field != "" {
		kind, v, ok := scalarString(lambdaAuth[c.field])
		if !ok {
			return "", false, fmt.Errorf("the Lambda authorizer's context has no usable %q field (WithAuthorizerCaller): "+
				"want a non-empty string, an integer of magnitude below 2^53 or a boolean", c.field)
		}
		return principal(callerLambdaCtx, c.field, kind, v), false, nil
	}
	return scope, scope == anonymous, nil
}

// warnShared logs, once, that a Lambda authorizer's callers share the
// anonymous scope.
func (c *callers) warnShared(ctx context.Context) {
	c.sharedScopeWarning.Do(func() {
		c.log().LogAttrs(ctx, slog.LevelWarn, "apigateway: a Lambda authorizer passed no principalId, so its callers share "+
			"one idempotency scope; name the context field that identifies them with apigateway.WithAuthorizerCaller")
	})
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
