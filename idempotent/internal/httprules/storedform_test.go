package httprules

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

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
	"Keep-Alive", "keep-alive", "Date", "Set-Cookie", "Te", "Upgrade", "X-Request-Id", "Idempotent-Replayed",
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

// randomResponse draws any Response: nil, empty and filled maps and
// slices, nil lists inside multiValueHeaders, any status.
func randomResponse(t *rapid.T) *Response {
	r := &Response{
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

// trickyResponses are hand-picked Responses at the edges of the encoding;
// each is checked against the reference and seeds the fuzz targets.
var trickyResponses = []*Response{
	{},
	{StatusCode: 201},
	{StatusCode: -1},
	{StatusCode: -9223372036854775808},
	{StatusCode: 9223372036854775807},
	{StatusCode: 200, Headers: map[string]string{}, MultiValueHeaders: map[string][]string{}, Cookies: []string{}},
	{StatusCode: 200, MultiValueHeaders: map[string][]string{"a": nil, "b": {}, "c": {""}, "": {"x", ""}}},
	{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "b": "", "": "e"}, Body: "x"},
	{StatusCode: 202, Body: "<script>&amp;</script>", IsBase64Encoded: true},
	{StatusCode: 203, Body: "\u2028\u2029\u202f\ufffd\x00\x01\b\f\n\r\t\x1f\x7f\"\\/"},
	{StatusCode: 204, Body: "a\xffb\xfe\xc3\x28\xed\xa0\x80\xf4\x90\x80\x80\xf0\x9f\x98"},
	{StatusCode: 205, Headers: map[string]string{"\xff": "1", "\xfe": "2", "\ufffd": "3"}}, // one key once encoded
	{StatusCode: 206, MultiValueHeaders: map[string][]string{"\xff": {"1"}, "\xfe": nil}},
	{StatusCode: 207, Cookies: []string{"a=1; Path=/", "", "b=<2>"}},
	{StatusCode: 208, Cookies: []string{}},
	{StatusCode: 209, Body: `{"paymentId":"pay_8e03978e40d5","status":"captured","amount":2500,"currency":"EUR"}`},
	{StatusCode: 210, IsBase64Encoded: true},
	{StatusCode: 211, Headers: map[string]string{"b": "1", "a": "2", "B": "3", "é": "4", "~": "5", "\x7f": "6"}},
	func() *Response {
		r := &Response{StatusCode: 212, MultiValueHeaders: map[string][]string{}}
		for i := range 40 { // past the key buffer on the stack
			r.MultiValueHeaders[fmt.Sprintf("X-H%02d", 39-i)] = []string{fmt.Sprint(i), "v"}
		}
		return r
	}(),
	{StatusCode: 213, Body: strings.Repeat("é<\"", 5000)},
}

// encodeSeeds are the encoded forms of the tricky responses.
func encodeSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, r := range trickyResponses {
		raw, err := referenceEncode(r)
		require.NoError(t, err)
		out = append(out, raw)
	}
	return out
}

// TestEncodeMatchesReference checks the tricky responses, and nil, against
// json.Marshal.
func TestEncodeMatchesReference(t *testing.T) {
	t.Parallel()
	for i, r := range append(trickyResponses, nil) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			requireSameEncoding(t, r)
		})
	}
}

// TestEncodeProperty checks random responses against json.Marshal.
func TestEncodeProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		requireSameEncoding(rt, randomResponse(rt))
	})
}

// requireSameEncoding requires Encode to write json.Marshal's bytes for r,
// in an output allocated at its exact size.
func requireSameEncoding(t require.TestingT, r *Response) {
	want, err := referenceEncode(r)
	require.NoError(t, err)
	got, err := Encode(r)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	require.Equal(t, len(got), cap(got), "the output is sized up front")
}

// TestEncodeWordBoundaries checks, against json.Marshal, strings of every
// length to 40 with one special character at every position, and to 20
// with two: the string loops take 8 bytes at a time, then the tail from the
// last 8, and write the end of the exact-size output through a scratch
// buffer. The strings are a body (the end of the output), a header name and
// value, and bodies of nothing but escapes.
func TestEncodeWordBoundaries(t *testing.T) {
	t.Parallel()
	specials := []string{`"`, `\`, "<", ">", "&", "\n", "\x01", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\ufffd", "\xff", "\xe2\x80", "😀", "\xf0\x9f\x98"}
	check := func(s string) {
		requireSameEncoding(t, &Response{StatusCode: 200, Body: s})
		requireSameEncoding(t, &Response{StatusCode: 200, Headers: map[string]string{s: s}, Body: "x"})
	}
	for n := 0; n <= 40; n++ {
		base := strings.Repeat("ab", n)[:n]
		for i := 0; i <= n; i++ {
			for _, sp := range specials {
				s := base[:i] + sp + base[i:]
				check(s)
				if n > 20 {
					continue
				}
				for j := i; j <= len(s); j++ {
					for _, sp2 := range specials[:6] {
						check(s[:j] + sp2 + s[j:])
					}
				}
			}
		}
		check(strings.Repeat(`"`, n))
		check(strings.Repeat(`\"`, n))
		check(strings.Repeat(`a"`, n))
		check(strings.Repeat(`<"`, n))
	}
}

// FuzzStoredFormEncode builds a response from the fuzzer's strings, shape
// bits choosing nil, empty or filled maps and lists, and requires
// json.Marshal's bytes.
func FuzzStoredFormEncode(f *testing.F) {
	f.Add(201, "Content-Type", "application/json", "Location", "/p/1", `{"a":"<b>"}`, uint8(0b1010))
	f.Add(-1, "\xff", "\u2028", "\xfe", "\x00", "", uint8(0xff))
	f.Add(0, "", "", "", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, status int, a, b, c, d, body string, shape uint8) {
		r := &Response{StatusCode: status, Body: body, IsBase64Encoded: shape&0x80 != 0}
		switch shape & 3 {
		case 1:
			r.Headers = map[string]string{}
		case 2, 3:
			r.Headers = map[string]string{a: b, c: d}
		}
		switch shape >> 2 & 3 {
		case 1:
			r.MultiValueHeaders = map[string][]string{}
		case 2:
			r.MultiValueHeaders = map[string][]string{a: {b, c}, d: nil}
		case 3:
			r.MultiValueHeaders = map[string][]string{b: {}, c: {a, d, body}}
		}
		switch shape >> 4 & 3 {
		case 1:
			r.Cookies = []string{}
		case 2, 3:
			r.Cookies = []string{d, a}
		}
		requireSameEncoding(t, r)
	})
}

// decodeDeviations are records not in Encode's exact shape, which Decode
// reads with json.Unmarshal: other order, white space, unknown or repeated
// fields, nulls, other escapes, other numbers, broken JSON.
var decodeDeviations = []string{
	``, ` `, `null`, `[]`, `{}`, `"x"`, `{"statusCode":201`, `{"statusCode":201}x`, `{"statusCode":201}{}`,
	`{"statusCode":201}`, ` {"statusCode":201}`, `{"statusCode":201} `, `{"statusCode": 201}`, "{\"statusCode\":201}\n",
	`{ "statusCode":201}`, `{"statusCode" :201}`, `{"statusCode":201 }`,
	// The status.
	`{"statusCode":2.0e2}`, `{"statusCode":201.0}`, `{"statusCode":2e2}`, `{"statusCode":-0}`, `{"statusCode":0201}`,
	`{"statusCode":"201"}`, `{"statusCode":null}`, `{"statusCode":true}`, `{"statusCode":+201}`, `{"statusCode":-}`,
	`{"statusCode":0}`, `{"statusCode":-201}`, `{"statusCode":999999999999999999}`, `{"statusCode":1000000000000000000}`,
	`{"statusCode":9223372036854775807}`, `{"statusCode":9223372036854775808}`, `{"statusCode":99999999999999999999}`,
	`{"statusCode":-9223372036854775808}`, `{"statusCode":-9223372036854775809}`, `{"statusCode":18446744073709551616}`,
	`{"statusCode":000000000000000000201}`, `{"statusCode":201,"statusCode":202}`, `{"statusCode":201,"statusCode":null}`,
	`{"StatusCode":201}`, `{"STATUSCODE":201}`, `{"statusCode":201,"Body":"x"}`, `{"status\u0043ode":201}`, `{"statusCod":201}`,
	// Order, unknown fields, repeats.
	`{"body":"x","statusCode":201}`, `{"statusCode":201,"body":"x","headers":{"a":"b"}}`, `{"statusCode":201,"unknown":1}`,
	`{"statusCode":201,"body":"x","isBase64Encoded":true,"x":null}`, `{"statusCode":201,"headers":{"a":"1"},"headers":{"b":"2"}}`,
	`{"statusCode":201,"multiValueHeaders":{"a":["1"]},"multiValueHeaders":{"b":null}}`, `{"statusCode":201,"body":"x","body":"y"}`,
	`{"statusCode":201,"cookies":["a"],"cookies":["b","c"]}`, `{"statusCode":201,"isBase64Encoded":true,"isBase64Encoded":false}`,
	// Members and nulls.
	`{"statusCode":201,"headers":null}`, `{"statusCode":201,"headers":{}}`, `{"statusCode":201,"headers":{"a":null}}`,
	`{"statusCode":201,"headers":{"a":"1","a":"2"}}`, `{"statusCode":201,"headers":{"a":"b",}}`, `{"statusCode":201,"headers":{"a":["b"]}}`,
	`{"statusCode":201,"headers":{"a":1}}`, `{"statusCode":201,"headers":{"a":"b"},}`, `{"statusCode":201,"headers":{"a""b"}}`,
	`{"statusCode":201,"headers":{,}}`, `{"statusCode":201,"headers":[]}`, `{"statusCode":201,"headers":"a"}`,
	`{"statusCode":201,"multiValueHeaders":null}`, `{"statusCode":201,"multiValueHeaders":{}}`, `{"statusCode":201,"multiValueHeaders":{"a":null}}`,
	`{"statusCode":201,"multiValueHeaders":{"a":[]}}`, `{"statusCode":201,"multiValueHeaders":{"a":[null]}}`, `{"statusCode":201,"multiValueHeaders":{"a":["1",null]}}`,
	`{"statusCode":201,"multiValueHeaders":{"a":"b"}}`, `{"statusCode":201,"multiValueHeaders":{"a":["1"],"a":null}}`,
	`{"statusCode":201,"multiValueHeaders":{"a":null,"a":["1"]}}`, `{"statusCode":201,"multiValueHeaders":{"a":[],"b":["1","2"],"a":["3"]}}`,
	`{"statusCode":201,"multiValueHeaders":{"a":["1",]}}`, `{"statusCode":201,"multiValueHeaders":{"a":[,]}}`, `{"statusCode":201,"multiValueHeaders":{"a":nul}}`,
	`{"statusCode":201,"multiValueHeaders":{"a":nullx}}`, `{"statusCode":201,"multiValueHeaders":{"a":[1]}}`,
	`{"statusCode":201,"cookies":null}`, `{"statusCode":201,"cookies":[]}`, `{"statusCode":201,"cookies":[null]}`, `{"statusCode":201,"cookies":["a",1]}`,
	`{"statusCode":201,"cookies":"a"}`, `{"statusCode":201,"body":null}`, `{"statusCode":201,"body":""}`, `{"statusCode":201,"body":1}`,
	`{"statusCode":201,"isBase64Encoded":false}`, `{"statusCode":201,"isBase64Encoded":null}`, `{"statusCode":201,"isBase64Encoded":"true"}`,
	`{"statusCode":201,"isBase64Encoded":tru}`, `{"statusCode":201,"isBase64Encoded":truex}`, `{"statusCode":201,"isBase64Encoded":true,}`,
	`{"statusCode":201,"body":"x","isBase64Encoded":true}`, `{"statusCode":201,"isBase64Encoded":true,"body":"x"}`,
	// Strings: escapes Encode does not write, surrogates, raw characters.
	`{"statusCode":201,"body":"\/"}`, `{"statusCode":201,"body":"\u00E9"}`, `{"statusCode":201,"body":"\u00e9"}`, `{"statusCode":201,"body":"\u0041"}`,
	`{"statusCode":201,"body":"\u003C"}`, `{"statusCode":201,"body":"\u003c\u003e\u0026"}`, `{"statusCode":201,"body":"\u0008\u000c\u000a\u000d\u0009"}`,
	`{"statusCode":201,"body":"\u0022\u005c"}`, `{"statusCode":201,"body":"\u0000\u001f\u007f"}`, `{"statusCode":201,"body":"\b\f\n\r\t\"\\"}`,
	`{"statusCode":201,"body":"\u2028\u2029\ufffd"}`, `{"statusCode":201,"body":"\uFFFD\u202F\u202f\u2027"}`, `{"statusCode":201,"body":"\U2028"}`,
	`{"statusCode":201,"body":"\ud83d\ude00"}`, `{"statusCode":201,"body":"\ud83d"}`, `{"statusCode":201,"body":"\ude00"}`, `{"statusCode":201,"body":"\ud83dx"}`,
	`{"statusCode":201,"body":"\ude00\ud83d"}`, `{"statusCode":201,"body":"\ud83d\u0041"}`, `{"statusCode":201,"body":"\x41"}`, `{"statusCode":201,"body":"\'"}`,
	`{"statusCode":201,"body":"\u"}`, `{"statusCode":201,"body":"\u00"}`, `{"statusCode":201,"body":"\u00g1"}`, `{"statusCode":201,"body":"\`,
	`{"statusCode":201,"body":"\u00`, `{"statusCode":201,"body":"\u202`, `{"statusCode":201,"body":"abc`, `{"statusCode":201,"body":"\"}`,
	"{\"statusCode\":201,\"body\":\"a\xffb\"}", "{\"statusCode\":201,\"body\":\"\xed\xa0\x80\"}", "{\"statusCode\":201,\"body\":\"\xc3\"}",
	"{\"statusCode\":201,\"body\":\"a\nb\"}", "{\"statusCode\":201,\"body\":\"\x00\"}", "{\"statusCode\":201,\"body\":\"\x7f\"}",
	"{\"statusCode\":201,\"body\":\"<>&\u2028\u2029\ufffd\"}", "{\"statusCode\":201,\"body\":\"é😀\"}", "{\"statusCode\":201,\"body\":\"\xf0\x9f\x98\"}",
	"{\"statusCode\":201,\"headers\":{\"\xff\":\"\xfe\"}}", "{\"statusCode\":201,\"multiValueHeaders\":{\"a\":[\"\xff\"]}}",
	`{"statusCode":201,"headers":{"\ufffd":"1","\ufffd":"2"}}`, `{"statusCode":201,"multiValueHeaders":{"\u003c":["1"],"<":null}}`,
	"\xef\xbb\xbf{\"statusCode\":201}", "{\"statusCode\":201}\x00",
}

// decodeInputs are the records the decode tests check: the encoded tricky
// responses, the deviations, and each encoded response cut short at every
// byte.
func decodeInputs(t testing.TB) [][]byte {
	in := encodeSeeds(t)
	for _, d := range decodeDeviations {
		in = append(in, []byte(d))
	}
	for _, raw := range encodeSeeds(t)[:len(trickyResponses)-1] { // not the 15 KB body
		for i := range raw {
			in = append(in, raw[:i])
		}
	}
	return in
}

// TestDecodeMatchesReference checks the decode inputs against
// json.Unmarshal.
func TestDecodeMatchesReference(t *testing.T) {
	t.Parallel()
	for _, raw := range decodeInputs(t) {
		requireSameDecoding(t, raw)
	}
}

// TestDecodeFastPath checks that what Encode writes takes the hand-written
// path (else the differential tests would only test json.Unmarshal), and
// the deviations that must not, do not.
func TestDecodeFastPath(t *testing.T) {
	t.Parallel()
	for _, raw := range encodeSeeds(t) {
		_, ok := parseStoredForm(raw)
		assert.True(t, ok, "%.200s", raw)
	}
	for _, raw := range []string{
		`{"statusCode":2.0e2}`, `{"statusCode":201.0}`, `{"statusCode":-0}`, `{"statusCode":201,"body":"\/"}`,
		`{"statusCode":201,"body":"\u00E9"}`, `{"statusCode":201,"body":"\u0041"}`, `{"statusCode":201,"body":"\u0008"}`,
		`{"statusCode":201,"body":"\uFFFD"}`, `{"statusCode":201,"body":"\ud83d\ude00"}`, `{"statusCode":201,"body":null}`,
		`{"statusCode":201,"multiValueHeaders":{"a":[null]}}`, `{"statusCode":201} `, `{"body":"x","statusCode":201}`,
		`{"statusCode":201,"headers":{"a":"1"},"headers":{"b":"2"}}`, "{\"statusCode\":201,\"body\":\"\xff\"}",
		`{"statusCode":9223372036854775808}`, `{"statusCode":-9223372036854775809}`, `{"statusCode":10000000000000000000}`, `{"StatusCode":201}`, `{"statusCode":201,"isBase64Encoded":false}`,
	} {
		_, ok := parseStoredForm([]byte(raw))
		assert.False(t, ok, raw)
	}
}

// TestDecodeProperty checks random responses' records, and those records
// with a byte changed, inserted or removed, against json.Unmarshal.
func TestDecodeProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		raw, err := referenceEncode(randomResponse(rt))
		require.NoError(rt, err)
		_, ok := parseStoredForm(raw)
		require.True(rt, ok, "Encode's shape takes the hand-written path: %s", raw)
		requireSameDecoding(rt, raw)

		i := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
		b := rapid.SampledFrom([]byte(` "\:,{}[]01-.eEnulltrue\/u`+"\x00\xff")).Draw(rt, "byte")
		requireSameDecoding(rt, append(append(raw[:i:i], b), raw[i+1:]...))
		requireSameDecoding(rt, append(append(raw[:i:i], b), raw[i:]...))
		requireSameDecoding(rt, append(raw[:i:i], raw[i+1:]...))
	})
}

// requireSameDecoding requires Decode to give json.Unmarshal's result,
// DeepEqual (nil and empty maps and slices apart), or an error where it
// errs.
func requireSameDecoding(t require.TestingT, raw []byte) {
	want, wantErr := referenceDecode(raw)
	got, err := Decode(raw)
	if wantErr != nil {
		require.Error(t, err, "%q: json.Unmarshal refuses it: %v", raw, wantErr)
		require.Nil(t, got)
		return
	}
	require.NoError(t, err, "%q", raw)
	require.Equal(t, want, got, "%q", raw)
}

// FuzzStoredFormDecode requires Decode to give json.Unmarshal's result, or
// an error where it errs, for any bytes.
func FuzzStoredFormDecode(f *testing.F) {
	for _, raw := range decodeInputs(f) {
		if len(raw) < 1<<10 {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		requireSameDecoding(t, raw)
	})
}

// TestEncodeDecodeRoundTrip checks that a record Encode wrote decodes to
// the response json.Unmarshal reads from it (the response as sent, see
// AsSent) for every storable status.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := randomResponse(rt)
		r.StatusCode = rapid.IntRange(200, 499).Filter(Storable).Draw(rt, "storable status")
		raw, err := Encode(r)
		require.NoError(rt, err)
		got, err := Decode(raw)
		require.NoError(rt, err)
		want, err := referenceDecode(raw)
		require.NoError(rt, err)
		require.Equal(rt, want, got)
		require.Equal(rt, AsSent(r.Body), got.Body)
	})
}

// headerNames are names for the header filter's tests: those it drops, in
// several cases, with Proxy- prefixes, with characters strings.ToLower maps
// outside ASCII (KELVIN SIGN lower-cases to k, I WITH DOT ABOVE to i), with
// invalid UTF-8, and past the stack buffer.
var headerNames = []string{
	"Content-Type", "content-type", "Location", "X-Request-Id", "x-request-id", "X-Foo", "x-foo", "X-FOO", "X-Bar", "",
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
		r             Response
	}{
		{name: "empty", r: Response{}},
		{name: "typical", r: *benchStoredResponse()},
		{name: "hop-by-hop and proxy", volatile: []string{"X-Volatile"}, r: Response{StatusCode: 200,
			Headers:           map[string]string{"Date": "x", "Proxy-A": "1", "X-Volatile": "v", "Keep": "k", "\u212aeep-Alive": "kelvin"},
			MultiValueHeaders: map[string][]string{"TE": {"t"}, "proxy-b": nil, "x-volatile": {}, "Keep": nil, "Other": {}}}},
		{name: "connection lists", r: Response{StatusCode: 200,
			Headers:           map[string]string{"Connection": " X-Foo ,, x-bar ,", "X-Foo": "1", "X-Bar": "2", "": "empty", "X-Baz": "3"},
			MultiValueHeaders: map[string][]string{"connection": {"X-Baz", "\u00a0X-Qux\u0085"}, "x-qux": {"q"}, "X-Keep": {"k"}}}},
		{name: "cookies", replayCookies: true, r: Response{StatusCode: 200, Cookies: []string{"a=\xff", ""},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1"}}}},
		{name: "cookies not replayed", r: Response{StatusCode: 200, Cookies: []string{"a=1"},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1"}}}},
		{name: "invalid UTF-8", volatile: []string{"X-\xfe"}, r: Response{StatusCode: 200, Body: "\xff",
			Headers:           map[string]string{"X-\xff": "\xfe"},
			MultiValueHeaders: map[string][]string{"Y-\xff": {"\xfe", "ok"}}}},
		{name: "invalid bytes lower-cased one by one", volatile: []string{"X-\xff\xfe"}, r: Response{StatusCode: 200,
			Headers:           map[string]string{"x-\xfe\xff": "dropped", "X-\xff": "kept"},
			MultiValueHeaders: map[string][]string{"X-\xc3\x28\xff": {"kept"}, "Connection": {"x-\x80\x80"}, "X-\xfe\xfe": {"listed"}}}},
		{name: "long names", volatile: []string{strings.Repeat("x", 129)}, r: Response{StatusCode: 200,
			MultiValueHeaders: map[string][]string{strings.Repeat("X", 129): {"1"}, strings.Repeat("X", 128): {"2"}, "Proxy-" + strings.Repeat("a", 200): {"3"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := NewFilter(tt.volatile, tt.replayCookies)
			assert.Equal(t, referenceStored(f, &tt.r), f.Stored(&tt.r))
		})
	}
	t.Run("random", func(t *testing.T) {
		t.Parallel()
		rapid.Check(t, func(rt *rapid.T) {
			name := rapid.OneOf(rapid.SampledFrom(headerNames), trickyString())
			volatile := rapid.SliceOfN(name, 0, 3).Draw(rt, "volatile")
			f := NewFilter(volatile, rapid.Bool().Draw(rt, "replay cookies"))
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
// apart once made valid UTF-8 (AsSent): names that would not make the
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
		if seen[AsSent(k)] {
			continue
		}
		seen[AsSent(k)] = true
		m[k] = value(rt, fmt.Sprint("value ", i))
	}
	return m
}

// TestStoredValuesApart checks that the stored headers' values, which
// share one slice, cannot overwrite one another through append.
func TestStoredValuesApart(t *testing.T) {
	t.Parallel()
	f := NewFilter(nil, false)
	s := f.Stored(&Response{StatusCode: 200, MultiValueHeaders: map[string][]string{"A": {"1"}, "B": {"2"}, "C": nil}})
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
	r, f := benchStoredResponse(), NewFilter([]string{"X-Request-Id"}, false)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = f.Stored(r) }), "kept whole")
	r.MultiValueHeaders["X-Request-Id"] = []string{"volatile"}
	allocs := testing.AllocsPerRun(100, func() { _ = f.Stored(r) })
	assert.LessOrEqual(t, allocs, 3.0, "the stored map and its values")
}

// TestCodecAllocations checks that the typical response encodes in one
// allocation and decodes in a handful (the Response, the text of its
// strings, a map and its values).
func TestCodecAllocations(t *testing.T) {
	r := benchStoredResponse()
	raw, err := Encode(r)
	require.NoError(t, err)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = Encode(r) }))
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { _, _ = Decode(raw) }), 5.0)
	require.True(t, utf8.Valid(raw))
}
