package nethttp

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		want   string
		err    error
	}{
		{name: "absent", values: nil, want: ""},
		{name: "bare", values: []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "quoted", values: []string{`"8e03978e-40d5"`}, want: "8e03978e-40d5"},
		{name: "escaped quote and backslash", values: []string{`"a\"b\\c"`}, want: `a"b\c`},
		{name: "quoted space and comma", values: []string{`" a, b "`}, want: " a, b "},
		{name: "white space around", values: []string{" \t k \t"}, want: "k"},
		{name: "bare with quote inside", values: []string{`a"b`}, want: `a"b`},
		{name: "visible ASCII", values: []string{"!#$%&'()*+-./09:;<=>?@AZ[\\]^_`az{|}~"}, want: "!#$%&'()*+-./09:;<=>?@AZ[\\]^_`az{|}~"},
		{name: "longest", values: []string{strings.Repeat("a", MaxKeyLength)}, want: strings.Repeat("a", MaxKeyLength)},
		{name: "longest quoted with escapes", values: []string{`"` + strings.Repeat(`\\`, MaxKeyLength) + `"`}, want: strings.Repeat(`\`, MaxKeyLength)},
		{name: "empty", values: []string{""}, err: errKeyEmpty},
		{name: "blank", values: []string{" \t "}, err: errKeyEmpty},
		{name: "empty quoted", values: []string{`""`}, err: errKeyEmpty},
		{name: "too long", values: []string{strings.Repeat("a", MaxKeyLength+1)}, err: errKeyTooLong},
		{name: "too long quoted", values: []string{`"` + strings.Repeat("a", MaxKeyLength+1) + `"`}, err: errKeyTooLong},
		{name: "two values", values: []string{"a", "b"}, err: errKeyMultiple},
		{name: "comma", values: []string{"a,b"}, err: errKeyComma},
		{name: "inner space", values: []string{"a b"}, err: errKeyChars},
		{name: "control", values: []string{"a\x00"}, err: errKeyChars},
		{name: "DEL", values: []string{"a\x7f"}, err: errKeyChars},
		{name: "UTF-8", values: []string{"ключ"}, err: errKeyChars},
		{name: "UTF-8 quoted", values: []string{`"ключ"`}, err: errKeyChars},
		{name: "tab quoted", values: []string{"\"a\tb\""}, err: errKeyChars},
		{name: "unterminated", values: []string{`"abc`}, err: errKeyQuoting},
		{name: "lone quote", values: []string{`"`}, err: errKeyQuoting},
		{name: "escaped closing quote", values: []string{`"abc\"`}, err: errKeyQuoting},
		{name: "bad escape", values: []string{`"\n"`}, err: errKeyQuoting},
		{name: "data after", values: []string{`"a"b`}, err: errKeyQuoting},
		{name: "parameters", values: []string{`"a";v=1`}, err: errKeyQuoting},
		{name: "list", values: []string{`"a", "b"`}, err: errKeyQuoting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKey(tt.values)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// FuzzParseKey checks that parsing never panics, that every accepted key is
// within the documented limits, and that a key always survives quoting.
// Under plain go test it runs the seeds in testdata/fuzz/FuzzParseKey.
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{"abc", `"abc"`, `"a\"b\\c"`, "", `""`, "a,b", `"a";p`, "\"\xff\""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		// A newline separates repeated header lines.
		key, err := ParseKey(strings.Split(header, "\n"))
		if err != nil {
			if _, ok := err.(*keyError); !ok {
				t.Fatalf("ParseKey(%q): error %T is not a KeyError", header, err)
			}
			if key != "" {
				t.Fatalf("ParseKey(%q) = %q with an error", header, key)
			}
			return
		}
		if key == "" {
			t.Fatalf("ParseKey(%q): no key and no error, but the header is present", header)
		}
		if len(key) > MaxKeyLength {
			t.Fatalf("ParseKey(%q): %d bytes", header, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < ' ' || key[i] > '~' {
				t.Fatalf("ParseKey(%q) = %q: byte %#x is not printable ASCII", header, key, key[i])
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := ParseKey([]string{quoted}); err != nil || again != key {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q (the quoted form of ParseKey(%q))", quoted, again, err, key, header)
		}
	})
}
