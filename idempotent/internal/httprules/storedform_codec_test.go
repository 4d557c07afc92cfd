package httprules

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// referenceDecode is Decode as it was, on json.Unmarshal alone: the
// definition the hand-written reader must equal.
func referenceDecode(raw []byte) (*Response, error) {
	var r Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if !Storable(r.StatusCode) {
		return nil, assert.AnError
	}
	return &r, nil
}

// TestEncodeGolden pins the bytes of a stored form: records written by
// earlier releases must keep replaying, and equal requests keep equal
// records.
func TestEncodeGolden(t *testing.T) {
	t.Parallel()
	raw, err := Encode(&Response{
		StatusCode:        http.StatusCreated,
		Headers:           map[string]string{"X-B": "2", "X-A": "<1>"},
		MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Vary": {"A", "B"}, "X-Nil": nil, "X-Empty": {}},
		Cookies:           []string{"a=1", "b=2\u2028"},
		Body:              "{\"id\":\"pay_1\"}\n\xff",
		IsBase64Encoded:   true,
	})
	require.NoError(t, err)
	assert.Equal(t, `{"statusCode":201,"headers":{"X-A":"\u003c1\u003e","X-B":"2"},`+
		`"multiValueHeaders":{"Content-Type":["application/json"],"Vary":["A","B"],"X-Empty":[],"X-Nil":null},`+
		`"cookies":["a=1","b=2\u2028"],"body":"{\"id\":\"pay_1\"}\n\ufffd","isBase64Encoded":true}`, string(raw))
	raw, err = Encode(&Response{StatusCode: 204, Headers: map[string]string{}, MultiValueHeaders: map[string][]string{}, Cookies: []string{}})
	require.NoError(t, err)
	assert.Equal(t, `{"statusCode":204}`, string(raw))
}

// TestEncodeMatchesMarshal checks Encode against json.Marshal, which
// defines the stored form, on any response.
func TestEncodeMatchesMarshal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := randomResponse(rt)
		want, err := json.Marshal(r)
		require.NoError(rt, err)
		got, err := Encode(r)
		require.NoError(rt, err)
		require.Equal(rt, string(want), string(got))
		require.Equal(rt, len(got), cap(got), "the buffer is sized exactly")
	})
}

// TestDecodeMatchesUnmarshal checks Decode against json.Unmarshal on the
// records json.Marshal writes, and on records changed so that the
// hand-written reader must leave them to json.Unmarshal (white space, field
// order and case, escapes, bytes replaced or cut off).
func TestDecodeMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := randomResponse(rt)
		if rapid.Bool().Draw(rt, "storable") {
			r.StatusCode = rapid.IntRange(200, 499).Filter(Storable).Draw(rt, "storable status")
		}
		b, err := json.Marshal(r)
		require.NoError(rt, err)
		raw := string(b)
		switch rapid.IntRange(0, 6).Draw(rt, "change") {
		case 1: // white space somewhere
			at := rapid.IntRange(0, len(raw)).Draw(rt, "at")
			raw = raw[:at] + rapid.SampledFrom([]string{" ", "\n", "\t"}).Draw(rt, "space") + raw[at:]
		case 2: // a byte replaced
			at := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
			raw = raw[:at] + string(rapid.Byte().Draw(rt, "byte")) + raw[at+1:]
		case 3: // cut off
			raw = raw[:rapid.IntRange(0, len(raw)-1).Draw(rt, "length")]
		case 4: // a piece inserted
			at := rapid.IntRange(0, len(raw)).Draw(rt, "at")
			raw = raw[:at] + rapid.SampledFrom([]string{`\u0041`, `\ud83d\ude00`, `\ud800`, `\/`, `null`, `"`, `,`, `0`, `-1`, "\xff", "\x01", `\u00`}).Draw(rt, "piece") + raw[at:]
		case 5: // fields in another order or case, as a map marshals them
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				if rapid.Bool().Draw(rt, "case") {
					m["StatusCode"] = m["statusCode"]
					delete(m, "statusCode")
				}
				mb, err := json.Marshal(m)
				require.NoError(rt, err)
				raw = string(mb)
			}
		case 6: // fields repeated
			raw = strings.Replace(raw, `{"statusCode":`, `{"body":"x","statusCode":`, 1)
			if at := strings.LastIndexByte(raw, '}'); at > 0 {
				raw = raw[:at] + `,"statusCode":201,"body":"y"` + raw[at:]
			}
		}
		want, wantErr := referenceDecode([]byte(raw))
		got, err := Decode([]byte(raw))
		require.Equal(rt, wantErr != nil, err != nil, "error: %v, reference: %v, record %q", err, wantErr, raw)
		require.Equal(rt, want, got, "record %q", raw)
	})
}

// FuzzDecode checks Decode against json.Unmarshal on any bytes.
func FuzzDecode(f *testing.F) {
	for _, r := range []*Response{benchStoredResponse(), {StatusCode: 200, Headers: map[string]string{"A": "\"é\\"}, Cookies: []string{"c"}, IsBase64Encoded: true}} {
		raw, err := Encode(r)
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Add([]byte(`{"statusCode":200,"multiValueHeaders":{"A":null,"B":[],"C":["\u00e9\n"]},"isBase64Encoded":false}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := referenceDecode(raw)
		got, err := Decode(raw)
		require.Equal(t, wantErr != nil, err != nil, "error: %v, reference: %v", err, wantErr)
		require.Equal(t, want, got)
	})
}

// TestDecodeAllocations checks that a record in Encode's shape is read by hand:
// with a few allocations, whatever the number of headers.
func TestDecodeAllocations(t *testing.T) {
	raw, err := Encode(benchStoredResponse())
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Decode(raw); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 6.0)
}
