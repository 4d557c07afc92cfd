package nethttp

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"Application/JSON; charset=UTF-8":   true,
		"application/problem+json":          true,
		"application/merge-patch+json":      true,
		"application/vnd.api+json; v=1":     true,
		"application/json;;bad":             true,
		"":                                  false,
		"text/plain":                        false,
		"text/json":                         false,
		"application/jsonl":                 false,
		"application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x":   false,
		"text/x+json":                       false,
	} {
		assert.Equal(t, want, isJSON(ct), ct)
	}
}

// TestFingerprintJSON checks that a JSON body's fingerprint, its canonical
// form written in place, is the format's: tag, then method, path, query,
// kind and body, each after its length as a uvarint. The lengths cross the
// uvarint's byte boundaries.
func TestFingerprintJSON(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 100, 117, 118, 119, 127, 128, 300, 16370, 16371, 16372, 16373, 16500, 70000} {
		body := `{"b":[` + strings.Repeat(`1,`, n/2) + `0], "a" : "` + strings.Repeat("<", n%7) + `"}`
		canon, err := canonjson.Canonicalize([]byte(body))
		require.NoError(t, err)
		want := []byte("idemkit/apigateway/fingerprint/v1")
		for _, part := range []string{"POST", "/payments", "a=1", "json", string(canon)} {
			want = binary.AppendUvarint(want, uint64(len(part)))
			want = append(want, part...)
		}
		got, err := appendFingerprint(nil, &fpRequest{Method: "POST", Path: "/payments", Query: "a=1", ContentType: "application/json; charset=utf-8", Body: []byte(body)})
		require.NoError(t, err)
		assert.Equal(t, want, got, "canonical body of %d bytes", len(canon))
	}
}

// TestFingerprintParts: moving bytes between the parts of a request changes
// its fingerprint.
func TestFingerprintParts(t *testing.T) {
	t.Parallel()
	fp := func(r fpRequest) string {
		b, err := appendFingerprint(nil, &r)
		require.NoError(t, err)
		return string(b)
	}
	base := fpRequest{Method: "POST", Path: "/a", Query: "b=c", Body: []byte("d")}
	for _, v := range []fpRequest{
		{Method: "POST", Path: "/ab", Query: "=c", Body: []byte("d")},
		{Method: "POST", Path: "/a", Query: "b=cd"},
		{Method: "POS", Path: "T/a", Query: "b=c", Body: []byte("d")},
		{Method: "POST", Path: "/a", Query: "b=c", ContentType: "application/json", Body: []byte(`"d"`)},
	} {
		assert.NotEqual(t, fp(base), fp(v), "%+v", v)
	}
	assert.Equal(t, fp(base), fp(base))
}

// TestFingerprintGolden pins the bytes of a raw body's fingerprint and of a
// JSON one's (a stored format: records hold their hash), and checks that a
// fingerprint appended in the spare capacity of the buffer holding the body,
// as nethttp appends it, is the same.
func TestFingerprintGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  fpRequest
		want string
	}{
		{"raw", fpRequest{Method: "POST", Path: "/p", Query: "a=1", ContentType: "text/plain", Body: []byte("b\x00dy")},
			"idemkit/apigateway/fingerprint/v1\x04POST\x02/p\x03a=1\x03raw\x04b\x00dy"},
		{"json", fpRequest{Method: "PATCH", Path: "/p/%2F", ContentType: "application/json", Body: []byte(` {"z":[1, 2.50], "a":"<"} `)},
			"idemkit/apigateway/fingerprint/v1\x05PATCH\x06/p/%2F\x00\x04json\x1b" + `{"a":"\u003c","z":[1,2.50]}`},
		{"no body", fpRequest{Method: "POST", Path: "/p", ContentType: "application/json"},
			"idemkit/apigateway/fingerprint/v1\x04POST\x02/p\x00\x03raw\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := appendFingerprint(nil, &tt.req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))

			for _, spare := range []int{0, 1, tt.req.FingerprintRoom(), 3*len(tt.req.Body) + tt.req.FingerprintRoom()} {
				buf := append(make([]byte, 0, len(tt.req.Body)+spare), tt.req.Body...)
				r := tt.req
				r.Body = buf
				got, err := appendFingerprint(buf[len(buf):], &r)
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(got), "spare %d", spare)
				assert.Equal(t, string(tt.req.Body), string(buf), "the body is left as it was")
			}
		})
	}
}
