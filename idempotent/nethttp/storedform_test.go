package nethttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// trickyPieces are the parts random strings are made of: every class of
// character the JSON encoding treats apart (escaped, HTML-escaped, U+2028/9,
// invalid UTF-8 and what it turns into, surrogates encoded in UTF-8), and
// characters whose strings.ToLower differs from strings.EqualFold's folding
// (KELVIN SIGN, I WITH DOT ABOVE, LONG S) for the header filter.
var trickyPieces = []string{
	"", "a", "Z", "0", " ", ",", ", ", " ,", "-", "x-", "Proxy-", "proxy-", "PROXY-", "Connection", "connection",
	"Keep-Alive", "keep-alive", "Date", "Set-Cookie", "Te", "Upgrade", "X-fpRequest-Id", "Idempotent-Replayed",
	`"`, `\`, "/", "<", ">", "&", "\x00", "\x01", "\b", "\f", "\n", "\r", "\t", "\x1f", "\x7f", "~",
	"é", "😀", "\u2028", "\u2029", "\u202f", "\ufffd", "\ufeff", "\u0085", "\u00a0", "\u212a", "\u0130", "\u017f",
	"\xff", "\xfe", "\x80", "\xc3", "\xc3\x28", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xc0\xaf", "\xf0\x9f\x98",
	`\u00e9`, `\/`, `{"a":1}`,
}

// trickyString draws a string of tricky pieces, or of arbitrary bytes.
func trickyString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) string {
			return strings.Join(rapid.SliceOfN(rapid.SampledFrom(trickyPieces), 0, 6).Draw(t, "pieces"), "")
		}),
		rapid.StringN(0, 8, -1),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 8), func(b []byte) string { return string(b) }),
	)
}

// stringList draws a nil, empty or filled list of strings.
func stringList(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 3).Draw(t, label+" shape") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(trickyString(), 1, 4).Draw(t, label)
}

// randomResponse draws any storedResponse: nil, empty and filled maps and
// slices, nil lists inside multiValueHeaders, any status.
func randomResponse(t *rapid.T) *storedResponse {
	r := &storedResponse{
		StatusCode: rapid.OneOf(rapid.IntRange(-1000, 1000), rapid.Int(), rapid.SampledFrom([]int{200, 201, 204, 301, 404, 499})).Draw(t, "status"),
		Body:       trickyString().Draw(t, "body"),
	}
	r.IsBase64Encoded = rapid.Bool().Draw(t, "base64")
	switch rapid.IntRange(0, 2).Draw(t, "headers shape") {
	case 1:
		r.Headers = map[string]string{}
	case 2:
		r.Headers = rapid.MapOfN(trickyString(), trickyString(), 1, 5).Draw(t, "headers")
	}
	switch rapid.IntRange(0, 2).Draw(t, "multi shape") {
	case 1:
		r.MultiValueHeaders = map[string][]string{}
	case 2:
		r.MultiValueHeaders = map[string][]string{}
		for i := range rapid.IntRange(1, 5).Draw(t, "multi size") {
			r.MultiValueHeaders[trickyString().Draw(t, "name")] = stringList(t, fmt.Sprint("values ", i))
		}
	}
	r.Cookies = stringList(t, "cookies")
	return r
}

// TestEncodeMatchesMarshal checks the hand-written encoder against its
// definition, json.Marshal, byte for byte, on any response (invalid UTF-8,
// escapes, nil and empty maps and lists included).
func TestEncodeMatchesMarshal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := randomResponse(rt)
		want, err := json.Marshal(r)
		require.NoError(rt, err)
		require.Equal(rt, string(want), string(encodeStored(r)))
	})
}

// TestEncodeDecodeRoundTrip checks that a record encodeStored wrote decodes to
// the response json.Unmarshal reads from it (the response as sent, see
// asSent) for every storable status.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := randomResponse(rt)
		r.StatusCode = rapid.IntRange(200, 499).Filter(storable).Draw(rt, "storable status")
		raw := encodeStored(r)
		got, err := decodeStored(raw)
		require.NoError(rt, err)
		require.Equal(rt, r.StatusCode, got.StatusCode)
		require.Equal(rt, asSent(r.Body), got.Body)
	})
}

// headerNames are names for the header filter's tests: those it drops, in
// several cases, with Proxy- prefixes, with characters strings.ToLower maps
// outside ASCII (KELVIN SIGN lower-cases to k, I WITH DOT ABOVE to i), with
// invalid UTF-8, and past the stack buffer.
var headerNames = []string{
	"Content-Type", "content-type", "Location", "X-fpRequest-Id", "x-request-id", "X-Foo", "x-foo", "X-FOO", "X-Bar", "",
	"Connection", "connection", "CONNECTION", "cOnNeCtIoN", "Keep-Alive", "keep-alive", "\u212aeep-Alive", "Te", "TE", "Trailer",
	"Transfer-Encoding", "Upgrade", "Date", "DATE", "Idempotent-Replayed", "Set-Cookie", "set-cookie", "X-Volatile", "x-volatile",
	"Proxy-Authenticate", "proxy-", "PROXY-X", "Proxy", "Proxy_", "\u0130", "i", "x-\u0130d", "X-\u017fecret", "X-Ärger", "x-ärger",
	"X-\xff", "x-\xfe", "\xffDate", "X-Foo ", " X-Foo", "X-Foo\t", strings.Repeat("X", 128), strings.Repeat("x", 129),
	"Proxy-" + strings.Repeat("a", 200), strings.Repeat("\u212a", 50),
}

// connectionValues are Connection header values: lists with spaces, empty
// items, tabs, Unicode space (strings.TrimSpace trims it), other cases.
var connectionValues = []string{
	"close", "X-Foo", "x-foo, X-Bar", " X-Foo ,, x-bar ,", "", ",", " ", "\tX-Foo\t", "\u00a0X-Foo\u0085", "X-\u0130d",
	"keep-alive, Upgrade", "X-\xff", "X-Ärger", strings.Repeat("x", 129), "\u212aeep-Alive", "Content-Type",
}

// TestStoredMatchesReference checks the header filter against the first
// implementation, on chosen and random responses and filters.
func TestStoredMatchesReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		volatile      []string
		replayCookies bool
		r             storedResponse
	}{
		{name: "empty", r: storedResponse{}},
		{name: "typical", r: *benchStoredResponse()},
		{name: "hop-by-hop and proxy", volatile: []string{"X-Volatile"}, r: storedResponse{StatusCode: 200,
			Headers:           map[string]string{"Date": "x", "Proxy-A": "1", "X-Volatile": "v", "Keep": "k", "\u212aeep-Alive": "kelvin"},
			MultiValueHeaders: map[string][]string{"TE": {"t"}, "proxy-b": nil, "x-volatile": {}, "Keep": nil, "Other": {}}}},
		{name: "connection lists", r: storedResponse{StatusCode: 200,
			Headers:           map[string]string{"Connection": " X-Foo ,, x-bar ,", "X-Foo": "1", "X-Bar": "2", "": "empty", "X-Baz": "3"},
			MultiValueHeaders: map[string][]string{"connection": {"X-Baz", "\u00a0X-Qux\u0085"}, "x-qux": {"q"}, "X-Keep": {"k"}}}},
		{name: "cookies", replayCookies: true, r: storedResponse{StatusCode: 200, Cookies: []string{"a=\xff", ""},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1"}}}},
		{name: "cookies not replayed", r: storedResponse{StatusCode: 200, Cookies: []string{"a=1"},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1"}}}},
		{name: "invalid UTF-8", volatile: []string{"X-\xfe"}, r: storedResponse{StatusCode: 200, Body: "\xff",
			Headers:           map[string]string{"X-\xff": "\xfe"},
			MultiValueHeaders: map[string][]string{"Y-\xff": {"\xfe", "ok"}}}},
		{name: "invalid bytes lower-cased one by one", volatile: []string{"X-\xff\xfe"}, r: storedResponse{StatusCode: 200,
			Headers:           map[string]string{"x-\xfe\xff": "dropped", "X-\xff": "kept"},
			MultiValueHeaders: map[string][]string{"X-\xc3\x28\xff": {"kept"}, "Connection": {"x-\x80\x80"}, "X-\xfe\xfe": {"listed"}}}},
		{name: "long names", volatile: []string{strings.Repeat("x", 129)}, r: storedResponse{StatusCode: 200,
			MultiValueHeaders: map[string][]string{strings.Repeat("X", 129): {"1"}, strings.Repeat("X", 128): {"2"}, "Proxy-" + strings.Repeat("a", 200): {"3"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newHeaderFilter(tt.volatile, tt.replayCookies)
			assert.Equal(t, referenceStored(f, &tt.r), f.Stored(&tt.r))
		})
	}
	t.Run("random", func(t *testing.T) {
		t.Parallel()
		rapid.Check(t, func(rt *rapid.T) {
			name := rapid.OneOf(rapid.SampledFrom(headerNames), trickyString())
			volatile := rapid.SliceOfN(name, 0, 3).Draw(rt, "volatile")
			f := newHeaderFilter(volatile, rapid.Bool().Draw(rt, "replay cookies"))
			r := randomResponse(rt)
			r.Headers = filterHeaders(rt, name, func(rt *rapid.T, label string) string {
				if rapid.Bool().Draw(rt, label+" is a list") {
					return rapid.SampledFrom(connectionValues).Draw(rt, label)
				}
				return trickyString().Draw(rt, label)
			})
			r.MultiValueHeaders = filterHeaders(rt, name, func(rt *rapid.T, label string) []string {
				vs := stringList(rt, label)
				if len(vs) > 0 && rapid.Bool().Draw(rt, label+" has a list") {
					vs[0] = rapid.SampledFrom(connectionValues).Draw(rt, label+" list")
				}
				return vs
			})
			require.Equal(rt, referenceStored(f, r), f.Stored(r))
		})
	})
}

// filterHeaders draws a nil, empty or filled header map whose names stay
// apart once made valid UTF-8 (asSent): names that would not make the
// result depend on map order, in both implementations.
func filterHeaders[V any](rt *rapid.T, name *rapid.Generator[string], value func(*rapid.T, string) V) map[string]V {
	switch rapid.IntRange(0, 3).Draw(rt, "shape") {
	case 0:
		return nil
	case 1:
		return map[string]V{}
	}
	m := map[string]V{}
	seen := map[string]bool{}
	for i := range rapid.IntRange(1, 8).Draw(rt, "size") {
		k := name.Draw(rt, "name")
		if seen[asSent(k)] {
			continue
		}
		seen[asSent(k)] = true
		m[k] = value(rt, fmt.Sprint("value ", i))
	}
	return m
}

// TestStoredValuesApart checks that the stored headers' values, which
// share one slice, cannot overwrite one another through append.
func TestStoredValuesApart(t *testing.T) {
	t.Parallel()
	f := newHeaderFilter(nil, false)
	s := f.Stored(&storedResponse{StatusCode: 200, MultiValueHeaders: map[string][]string{"A": {"1"}, "B": {"2"}, "C": nil}})
	for k := range s.MultiValueHeaders {
		s.MultiValueHeaders[k] = append(s.MultiValueHeaders[k], "appended to "+k)
	}
	assert.Equal(t, map[string][]string{"A": {"1", "appended to A"}, "B": {"2", "appended to B"}, "C": {"appended to C"}}, s.MultiValueHeaders)
}

// TestStoredAllocations checks that filtering takes no allocation per
// header name: none for the typical response, whose headers are all kept
// (its map is shared), and for one that loses a header only the stored
// form's map (its header and one group) and the values.
func TestStoredAllocations(t *testing.T) {
	r, f := benchStoredResponse(), newHeaderFilter([]string{"X-fpRequest-Id"}, false)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = f.Stored(r) }), "kept whole")
	r.MultiValueHeaders["X-fpRequest-Id"] = []string{"volatile"}
	allocs := testing.AllocsPerRun(100, func() { _ = f.Stored(r) })
	assert.LessOrEqual(t, allocs, 3.0, "the stored map and its values")
}

// TestEncodeGolden pins the bytes of a stored form: records written by
// earlier releases must keep replaying, and equal responses keep equal
// records.
func TestEncodeGolden(t *testing.T) {
	t.Parallel()
	raw := encodeStored(&storedResponse{
		StatusCode:        http.StatusCreated,
		Headers:           map[string]string{"X-B": "2", "X-A": "<1>"},
		MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Vary": {"A", "B"}, "X-Nil": nil, "X-Empty": {}},
		Cookies:           []string{"a=1", "b=2\u2028"},
		Body:              "{\"id\":\"pay_1\"}\n\xff",
		IsBase64Encoded:   true,
	})
	assert.Equal(t, `{"statusCode":201,"headers":{"X-A":"\u003c1\u003e","X-B":"2"},`+
		`"multiValueHeaders":{"Content-Type":["application/json"],"Vary":["A","B"],"X-Empty":[],"X-Nil":null},`+
		`"cookies":["a=1","b=2\u2028"],"body":"{\"id\":\"pay_1\"}\n\ufffd","isBase64Encoded":true}`, string(raw))
	raw = encodeStored(&storedResponse{StatusCode: 204, Headers: map[string]string{}, MultiValueHeaders: map[string][]string{}, Cookies: []string{}})
	assert.Equal(t, `{"statusCode":204}`, string(raw))
}
