package apigateway

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
)

func TestScopeV2(t *testing.T) {
	t.Parallel()
	type authz = events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	jwt := func(claims map[string]string) *authz {
		return &authz{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
	}
	iam := func(d events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) *authz { return &authz{IAM: &d} }
	tests := []struct {
		name  string
		authz *authz
		want  string
	}{
		{"none", nil, anonymous},
		{"empty", &authz{}, anonymous},
		{"JWT subject and issuer", jwt(map[string]string{"sub": "alice", "iss": "https://idp", "exp": "1"}), "jwt:11:https://idp:5:alice"},
		{"JWT subject without issuer", jwt(map[string]string{"sub": "alice"}), "jwt:0::5:alice"},
		{"JWT client credentials", jwt(map[string]string{"client_id": "svc", "iss": "https://idp"}), "jwt-client:11:https://idp:3:svc"},
		{"JWT without identity", jwt(map[string]string{"scope": "read"}), anonymous},
		{"IAM user", iam(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/a", CallerID: "AIDA", AccountID: "1"}), "iam:21:arn:aws:iam::1:user/a"},
		{"IAM caller only", iam(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{CallerID: "AROA:s", AccountID: "1"}), "iam-caller:1:1:6:AROA:s"},
		{"IAM via Cognito identity pool", iam(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			UserARN:         "arn:aws:sts::1:assumed-role/Unauth/CognitoIdentityCredentials",
			CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityID: "eu:123", IdentityPoolID: "eu:pool"},
		}), "cognito:7:eu:pool:6:eu:123"},
		{"Lambda authorizer", &authz{Lambda: map[string]any{"principalId": "user-1", "tenant": "t"}}, "lambda:6:user-1"},
		{"Lambda authorizer without principal", &authz{Lambda: map[string]any{"tenant": "t"}}, anonymous},
		{"Lambda authorizer non-string principal", &authz{Lambda: map[string]any{"principalId": 7.0}}, anonymous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, scopeV2(&events.APIGatewayV2HTTPRequestContext{Authorizer: tt.authz}))
		})
	}
}

func TestScopeV1(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		authz    map[string]any
		identity events.APIGatewayRequestIdentity
		want     string
	}{
		{name: "none", want: anonymous},
		{name: "only a source IP", identity: events.APIGatewayRequestIdentity{SourceIP: "203.0.113.1"}, want: anonymous},
		{name: "Cognito user pool claims", authz: map[string]any{"claims": map[string]any{"sub": "alice", "iss": "https://idp", "email_verified": true}}, want: "jwt:11:https://idp:5:alice"},
		{name: "claims built in Go", authz: map[string]any{"claims": map[string]string{"sub": "alice", "iss": "https://idp"}}, want: "jwt:11:https://idp:5:alice"},
		{name: "claims client", authz: map[string]any{"claims": map[string]any{"client_id": "svc"}}, want: "jwt-client:0::3:svc"},
		{name: "Lambda authorizer", authz: map[string]any{"principalId": "user-1", "integrationLatency": 3.0}, want: "lambda:6:user-1"},
		{name: "claims win over API key", authz: map[string]any{"claims": map[string]any{"sub": "a"}}, identity: events.APIGatewayRequestIdentity{APIKeyID: "k1"}, want: "jwt:0::1:a"},
		{name: "Cognito identity", identity: events.APIGatewayRequestIdentity{CognitoIdentityID: "eu:123", CognitoIdentityPoolID: "eu:pool", UserArn: "arn:aws:sts::1:assumed-role/R/CognitoIdentityCredentials"}, want: "cognito:7:eu:pool:6:eu:123"},
		{name: "IAM user ARN", identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::1:user/a", Caller: "AIDA", APIKeyID: "k1"}, want: "iam:21:arn:aws:iam::1:user/a"},
		{name: "IAM caller", identity: events.APIGatewayRequestIdentity{Caller: "AIDA", AccountID: "1"}, want: "iam-caller:1:1:4:AIDA"},
		{name: "API key", identity: events.APIGatewayRequestIdentity{APIKeyID: "k1", APIKey: "secret"}, want: "apikey:2:k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, scopeV1(&events.APIGatewayProxyRequestContext{Authorizer: tt.authz, Identity: tt.identity}))
		})
	}
}

func TestPrincipalUnambiguous(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{principal(callerJWT, "a|b", "c"), principal(callerJWT, "a", "b|c")},
		{principal(callerJWT, "a:1:b", ""), principal(callerJWT, "a", "b")},
		{principal(callerJWT, "", "ab"), principal(callerJWT, "a", "b")},
		{principal(callerLambda, "x"), principal(callerAPIKey, "x")},
		{principal(callerIAM, "anonymous"), anonymous},
		{principal(callerLambda, ""), principal(callerLambda)},
	}
	for _, p := range pairs {
		assert.NotEqual(t, p[0], p[1])
	}
}
