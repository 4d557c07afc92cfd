package canonjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{name: "key order and white space", in: ` { "b" : 1 , "a" : [ true , null ] } `, want: `{"a":[true,null],"b":1}`},
		{name: "nested objects sorted", in: `{"z":{"y":1,"x":2},"a":{}}`, want: `{"a":{},"z":{"x":2,"y":1}}`},
		{name: "numbers kept exactly", in: `{"n":12345678901234567891}`, want: `{"n":12345678901234567891}`},
		{name: "escapes normalized", in: `"\u0041\/"`, want: `"A/"`},
		{name: "unicode kept", in: `{"é":"ü"}`, want: `{"é":"ü"}`},
		{name: "scalar", in: `42`, want: `42`},
		{name: "empty array", in: `[]`, want: `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := canonjson.Canonicalize([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestCanonicalizeDistinguishes(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{`{"amount":9007199254740993}`, `{"amount":9007199254740992}`}, // above 2^53
		{`{"a":"1"}`, `{"a":1}`},
		{`[1,2]`, `[2,1]`},
		{`{"a":null}`, `{}`},
	}
	for _, p := range pairs {
		a, err := canonjson.Canonicalize([]byte(p[0]))
		require.NoError(t, err)
		b, err := canonjson.Canonicalize([]byte(p[1]))
		require.NoError(t, err)
		assert.NotEqual(t, string(a), string(b), "%s vs %s", p[0], p[1])
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     error
	}{
		{name: "duplicate key", in: `{"a":1,"a":2}`, want: canonjson.ErrDuplicateKey},
		{name: "nested duplicate key", in: `{"x":{"a":1,"b":2,"a":1}}`, want: canonjson.ErrDuplicateKey},
		{name: "trailing data", in: `{} {}`, want: canonjson.ErrInvalid},
		{name: "truncated", in: `{"a":`, want: canonjson.ErrInvalid},
		{name: "not JSON", in: `amount=5`, want: canonjson.ErrInvalid},
		{name: "empty", in: ``, want: canonjson.ErrInvalid},
		{name: "invalid UTF-8", in: "\"\xff\"", want: canonjson.ErrInvalid},
		{name: "too deep", in: strings.Repeat("[", canonjson.MaxDepth+2) + strings.Repeat("]", canonjson.MaxDepth+2), want: canonjson.ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := canonjson.Canonicalize([]byte(tt.in))
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

// FuzzCanonicalize checks that canonical output is valid JSON, a fixed point,
// and means the same as the input.
func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":[1,2,{"c":null}]}`, `"x"`, `1e400`, `{"a":1,"a":1}`, `[`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := canonjson.Canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		again, err := canonjson.Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
		var a, b any
		if json.Unmarshal(in, &a) == nil {
			require.NoError(t, json.Unmarshal(out, &b))
			assert.Equal(t, a, b)
		}
	})
}
