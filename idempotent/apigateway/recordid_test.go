package apigateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// claimSpy records the id of every claim.
type claimSpy struct {
	storage.Store
	ids []string
}

func (s *claimSpy) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.ids = append(s.ids, rec.ID)
	return s.Store.Claim(ctx, rec, now)
}

func TestRecordIDMatchesTheAdapter(t *testing.T) {
	t.Parallel()
	type authz = events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	tests := []struct {
		name   string
		header string
		authz  *authz
		opts   []apigateway.Option
		kind   string
		parts  []string
	}{
		{"JWT", "k-1", &authz{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
			Claims: map[string]string{"iss": "https://idp.example", "sub": "alice"}}}, nil, "jwt", []string{"https://idp.example", "alice"}},
		{"quoted key is the same key", `"k-1"`, &authz{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
			Claims: map[string]string{"iss": "https://idp.example", "sub": "alice"}}}, nil, "jwt", []string{"https://idp.example", "alice"}},
		{"IAM user", "k-2", &authz{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			UserARN: "arn:aws:iam::1:user/a"}}, nil, "iam", []string{"arn:aws:iam::1:user/a"}},
		{"Lambda principal", "k-3", &authz{Lambda: map[string]any{"principalId": "u-1"}}, nil, "lambda", []string{"u-1"}},
		{"Lambda context number", "k-4", &authz{Lambda: map[string]any{"tenant": 42.0}},
			[]apigateway.Option{apigateway.WithAuthorizerCaller("tenant")}, "lambda-context", []string{"tenant", "42"}},
		{"Lambda context string", "k-4", &authz{Lambda: map[string]any{"tenant": "42"}},
			[]apigateway.Option{apigateway.WithAuthorizerCaller("tenant")}, "lambda-context", []string{"tenant", `"42"`}},
		{"anonymous", "k-5", nil, nil, "anonymous", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spy := &claimSpy{Store: idempotent.NewMemoryStore()}
			h := apigateway.WrapV2(newEngine(spy, idempotent.WithPrefix("payments")), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
			}, tt.opts...)
			ev := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": tt.header}, RawPath: "/p"}
			ev.RequestContext.HTTP.Method = "POST"
			ev.RequestContext.Authorizer = tt.authz
			out, err := h(t.Context(), ev)
			require.NoError(t, err)
			require.Equal(t, 201, out.StatusCode)
			require.Len(t, spy.ids, 1)

			id, err := apigateway.RecordID("payments", tt.header, tt.kind, tt.parts...)
			require.NoError(t, err)
			assert.Equal(t, spy.ids[0], id)
		})
	}
}

func TestRecordIDRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, kind string
		parts           []string
		want            string
	}{
		{"empty key", "", "anonymous", nil, "Idempotency-Key"},
		{"bad quoting", `"abc`, "anonymous", nil, "quoted"},
		{"unknown kind", "k", "oauth", nil, "unknown caller kind"},
		{"too few parts", "k", "jwt", []string{"iss"}, "takes 2 parts"},
		{"value not JSON", "k", "lambda-context", []string{"tenant", "alice"}, "not one JSON value"},
		{"value not a scalar", "k", "lambda-context", []string{"tenant", "1.5"}, "integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := apigateway.RecordID("p", tt.key, tt.kind, tt.parts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
