package apigateway_test

// Responses back into events: what the handler wrote, and what a replay
// gives, as each payload version carries it (headers with one value and
// with more, cookies, base64 bodies).

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"maps"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

func TestReplay(t *testing.T) {
	t.Parallel()
	binary := make([]byte, 64)
	_, _ = rand.Read(binary)
	tests := []struct {
		name  string
		first resp
	}{
		{
			name: "JSON body with headers",
			first: resp{
				status: http.StatusCreated,
				headers: map[string]string{
					"Content-Type":       "application/json; charset=utf-8",
					"Location":           "/payments/42",
					"X-Custom":           "kept",
					"Date":               "Mon, 02 Jan 2006 15:04:05 GMT",
					"Connection":         "keep-alive, X-Hop",
					"X-Hop":              "named by Connection",
					"Keep-Alive":         "timeout=5",
					"Proxy-Authenticate": "Basic",
					"TE":                 "trailers",
					"Trailer":            "Expires",
					"Transfer-Encoding":  "chunked",
					"Upgrade":            "h2c",
					"X-Request-Id":       "volatile",
					"X-Hop2":             "named by Connection in the other map",
				},
				multi:   map[string][]string{"X-Multi": {"a", "b"}, "proxy-connection": {"close"}, "connection": {"x-hop2"}},
				cookies: []string{"session=secret; HttpOnly"},
				body:    `{"id":42,"note":"<&>"}`,
			},
		},
		{
			name:  "base64 body byte for byte",
			first: resp{status: http.StatusOK, headers: map[string]string{"Content-Type": "application/octet-stream"}, body: base64.StdEncoding.EncodeToString(binary), base64: true},
		},
		{
			name:  "empty body, no headers",
			first: resp{status: http.StatusNoContent},
		},
	}
	for _, f := range flavors {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				runs := 0
				call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
					runs++
					return tt.first, nil
				}, apigateway.WithHTTPOptions(nethttp.WithVolatileHeaders("x-request-id")))

				first := call(post("key-1", `{"amount":100}`))
				second := call(post("key-1", `{"amount":100}`))
				require.Equal(t, 1, runs, "a duplicate must not run the handler")

				// The first client gets the handler's response unchanged.
				assert.Equal(t, tt.first.status, first.status)
				assert.Equal(t, tt.first.body, first.body)
				assert.Equal(t, tt.first.base64, first.base64)
				assert.ElementsMatch(t, tt.first.cookies, first.cookies)
				assert.False(t, replayed(first))
				if tt.first.headers != nil {
					assert.Equal(t, tt.first.headers["Date"], first.headers["Date"])
				}

				// The duplicate gets it again, less what is never stored.
				assert.Equal(t, tt.first.status, second.status)
				assert.Equal(t, tt.first.body, second.body)
				assert.Equal(t, tt.first.base64, second.base64)
				assert.True(t, replayed(second))
				assert.Empty(t, second.cookies, "cookies are not replayed by default")
				for _, name := range []string{"Content-Type", "Location", "X-Custom"} {
					if v, ok := tt.first.headers[name]; ok {
						assert.Equal(t, v, second.headers[name], name)
					}
				}
				for _, name := range []string{"Date", "Connection", "X-Hop", "Keep-Alive", "Proxy-Authenticate", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "X-Request-Id", "X-Hop2"} {
					assert.NotContains(t, second.headers, name)
				}
				if tt.first.multi != nil {
					assert.Equal(t, map[string][]string{"X-Multi": {"a", "b"}}, second.multi)
				}
			})
		}
	}
}

func TestReplayCookies(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
				return resp{status: http.StatusOK, cookies: []string{"a=1", "b=2; Secure"}, body: "ok"}, nil
			}, apigateway.WithHTTPOptions(nethttp.WithReplayCookies()))
			first := call(post("k", "{}"))
			second := call(post("k", "{}"))
			assert.True(t, replayed(second))
			assert.ElementsMatch(t, []string{"a=1", "b=2; Secure"}, first.cookies)
			assert.ElementsMatch(t, first.cookies, second.cookies)
		})
	}
}

// TestReplayOfInvalidUTF8: a body or header that is not valid UTF-8 reaches
// the first client through the Lambda runtime's JSON, one U+FFFD per invalid
// byte; the duplicate gets exactly that, not an error.
func TestReplayOfInvalidUTF8(t *testing.T) {
	t.Parallel()
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			call := f.wrap(t, newEngine(idempotent.NewMemoryStore()), func(context.Context, req) (resp, error) {
				runs++
				return resp{status: http.StatusOK, headers: map[string]string{"X-Name": "caf\xe9"}, body: "caf\xe9 \xff\xfe ok"}, nil
			})
			first := call(post("key-1", `{"amount":100}`))
			second := call(post("key-1", `{"amount":100}`))
			require.Equal(t, 1, runs)
			assert.Equal(t, "caf\xe9 \xff\xfe ok", first.body, "the first client gets the handler's response")
			assert.Equal(t, http.StatusOK, second.status)
			assert.True(t, replayed(second))
			assert.Equal(t, "caf\uFFFD \uFFFD\uFFFD ok", second.body, "as the runtime's JSON sent it the first time")
			assert.Equal(t, "caf\uFFFD", second.headers["X-Name"])
		})
	}
}

// TestHandlerResponses: what an http.Handler behind HandlerV1 and HandlerV2
// writes becomes the event response: a header with one value in Headers,
// with more in MultiValueHeaders, cookies in Cookies (payload 2.0) or as
// Set-Cookie headers (1.0), a body that is not valid UTF-8 in base64, and
// Content-Length left to API Gateway. The first status written counts.
func TestHandlerResponses(t *testing.T) {
	t.Parallel()
	binary := []byte{0xff, 0x00, 0xfe, 'x'}
	tests := []struct {
		name    string
		h       http.HandlerFunc
		status  int
		single  map[string]string
		multi   map[string][]string
		cookies []string
		body    string
		base64  bool
	}{
		{
			name: "headers and cookies",
			h: func(w http.ResponseWriter, _ *http.Request) {
				h := w.Header()
				h.Set("Content-Type", "application/json")
				h.Add("X-Multi", "a")
				h.Add("X-Multi", "b")
				h.Set("Content-Length", "2")
				http.SetCookie(w, &http.Cookie{Name: "a", Value: "1"})
				http.SetCookie(w, &http.Cookie{Name: "b", Value: "2"})
				w.WriteHeader(http.StatusCreated)
				w.WriteHeader(http.StatusInternalServerError) // too late: the first counts
				_, _ = io.WriteString(w, "{}")
			},
			status: http.StatusCreated, single: map[string]string{"Content-Type": "application/json"},
			multi: map[string][]string{"X-Multi": {"a", "b"}}, cookies: []string{"a=1", "b=2"}, body: "{}",
		},
		{
			name:   "binary body",
			h:      func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(binary) },
			status: http.StatusOK, body: base64.StdEncoding.EncodeToString(binary), base64: true,
		},
		{
			name: "body not UTF-8 in a text type",
			h: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "caf\xe9")
			},
			status: http.StatusOK, single: map[string]string{"Content-Type": "text/plain"}, body: base64.StdEncoding.EncodeToString([]byte("caf\xe9")), base64: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v2, err := apigateway.HandlerV2(tt.h)(t.Context(), eventV2(t, req{method: http.MethodGet}))
			require.NoError(t, err)
			assert.Equal(t, tt.status, v2.StatusCode)
			assert.Equal(t, tt.single, v2.Headers)
			assert.Equal(t, tt.multi, v2.MultiValueHeaders)
			assert.Equal(t, tt.cookies, v2.Cookies, "payload 2.0 carries cookies apart")
			assert.Equal(t, tt.body, v2.Body)
			assert.Equal(t, tt.base64, v2.IsBase64Encoded)

			v1, err := apigateway.HandlerV1(tt.h)(t.Context(), eventV1(t, req{method: http.MethodGet}))
			require.NoError(t, err)
			assert.Equal(t, tt.status, v1.StatusCode)
			assert.Equal(t, tt.single, v1.Headers)
			wantMulti := maps.Clone(tt.multi)
			if len(tt.cookies) > 0 {
				wantMulti["Set-Cookie"] = tt.cookies // payload 1.0 has no place for them but the headers
			}
			assert.Equal(t, wantMulti, v1.MultiValueHeaders)
			assert.Equal(t, tt.body, v1.Body)
			assert.Equal(t, tt.base64, v1.IsBase64Encoded)
		})
	}
}
