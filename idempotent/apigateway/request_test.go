package apigateway

import (
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/internal/httprules"
)

func TestRequestV1(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   events.APIGatewayProxyRequest
		want request
	}{
		{
			name: "as API Gateway sends it",
			ev: events.APIGatewayProxyRequest{
				HTTPMethod: "post", Path: "/orders/7", Resource: "/orders/{id}",
				Headers:                         map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k2"},
				MultiValueHeaders:               map[string][]string{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1", "k2"}},
				QueryStringParameters:           map[string]string{"b": "2", "a": "3"},
				MultiValueQueryStringParameters: map[string][]string{"b": {"2"}, "a": {"1", "3"}},
				Body:                            "e30=", IsBase64Encoded: true,
			},
			want: request{method: "POST", path: "/orders/7", query: "a=1&a=3&b=2", keyValues: []string{"k1", "k2"}, contentType: "application/json", body: "e30=", base64: true, scope: anonymous},
		},
		{
			name: "single-value maps and request context only",
			ev: events.APIGatewayProxyRequest{
				Headers:               map[string]string{"idempotency-key": "k"},
				QueryStringParameters: map[string]string{"q": "a b"},
				RequestContext:        events.APIGatewayProxyRequestContext{HTTPMethod: "PATCH", Path: "/x"},
			},
			want: request{method: "PATCH", path: "/x", query: "q=a+b", keyValues: []string{"k"}, scope: anonymous},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, requestV1(&tt.ev))
		})
	}
}

func TestRequestV2(t *testing.T) {
	t.Parallel()
	withHTTP := func(ev events.APIGatewayV2HTTPRequest, method, path string) events.APIGatewayV2HTTPRequest {
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
		return ev
	}
	tests := []struct {
		name string
		ev   events.APIGatewayV2HTTPRequest
		want request
	}{
		{
			name: "as API Gateway sends it",
			ev: withHTTP(events.APIGatewayV2HTTPRequest{
				RawPath: "/prod/orders", RawQueryString: "b=2&a=%20x&a=1",
				QueryStringParameters: map[string]string{"a": " x,1", "b": "2"},
				Headers:               map[string]string{"content-type": "text/plain", "idempotency-key": "a, b"},
				Body:                  "hi",
			}, "POST", "/orders"),
			want: request{method: "POST", path: "/prod/orders", query: "a=+x&a=1&b=2", keyValues: []string{"a, b"}, contentType: "text/plain", body: "hi", scope: anonymous},
		},
		{
			name: "no raw path or raw query",
			ev:   withHTTP(events.APIGatewayV2HTTPRequest{QueryStringParameters: map[string]string{"z": "1", "a": "x,y"}}, "patch", "/p"),
			want: request{method: "PATCH", path: "/p", query: "a=x%2Cy&z=1", scope: anonymous},
		},
		{
			name: "unparseable raw query counts as given",
			ev:   withHTTP(events.APIGatewayV2HTTPRequest{RawPath: "/p", RawQueryString: "a=%zz"}, "POST", "/p"),
			want: request{method: "POST", path: "/p", query: "\x00raw\x00a=%zz", scope: anonymous},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, requestV2(&tt.ev))
		})
	}
}

func TestFingerprintBodies(t *testing.T) {
	t.Parallel()
	fp := func(r request) ([]byte, error) { return fingerprint(&r) }

	// A base64 flag on a body that is not base64 counts the text as given,
	// distinct from the same text sent plainly.
	bad, err := fp(request{body: "not base64!", base64: true})
	require.NoError(t, err)
	plain, err := fp(request{body: "not base64!"})
	require.NoError(t, err)
	assert.NotEqual(t, bad, plain)

	_, err = fp(request{contentType: "application/json", body: strings.Repeat("[", 600) + strings.Repeat("]", 600)})
	var be *httprules.BodyError
	require.ErrorAs(t, err, &be)
	assert.Contains(t, be.Reason, "nested too deeply")
}
