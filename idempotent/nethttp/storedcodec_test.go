package nethttp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// referenceDecode is decodeStored as it was, on json.Unmarshal alone: the
// definition the hand-written reader must equal.
func referenceDecode(raw []byte) (*storedResponse, error) {
	var r storedResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if !storable(r.StatusCode) {
		return nil, assert.AnError
	}
	return &r, nil
}

// TestDecodeMatchesUnmarshal checks decodeStored against json.Unmarshal on
// the records json.Marshal writes, and on records changed so that the
// hand-written reader must leave them to json.Unmarshal (white space, field
// order and case, escapes, bytes replaced or cut off).
func TestDecodeMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := randomResponse(rt)
		if rapid.Bool().Draw(rt, "storable") {
			r.StatusCode = rapid.IntRange(200, 499).Filter(storable).Draw(rt, "storable status")
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
		got, err := decodeStored([]byte(raw))
		require.Equal(rt, wantErr != nil, err != nil, "error: %v, reference: %v, record %q", err, wantErr, raw)
		require.Equal(rt, want, got, "record %q", raw)
	})
}

// FuzzDecode checks decodeStored against json.Unmarshal on any bytes.
func FuzzDecode(f *testing.F) {
	for _, r := range []*storedResponse{benchStoredResponse(), {StatusCode: 200, Headers: map[string]string{"A": "\"é\\"}, Cookies: []string{"c"}, IsBase64Encoded: true}} {
		f.Add(encodeStored(r))
	}
	f.Add([]byte(`{"statusCode":200,"multiValueHeaders":{"A":null,"B":[],"C":["\u00e9\n"]},"isBase64Encoded":false}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := referenceDecode(raw)
		got, err := decodeStored(raw)
		require.Equal(t, wantErr != nil, err != nil, "error: %v, reference: %v", err, wantErr)
		require.Equal(t, want, got)
	})
}

// TestDecodeAllocations checks that a record in json.Marshal's shape is read
// by hand: with a few allocations, whatever its number of headers.
func TestDecodeAllocations(t *testing.T) {
	raw := encodeStored(benchStoredResponse())
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := decodeStored(raw); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 6.0)
}
