package canonjson_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// trickyInputs are documents at the edges of the canonical form: each is
// checked against the reference by TestDifferential and seeds
// FuzzDifferential.
var trickyInputs = func() []string {
	in := []string{
		// The other tests' inputs.
		` { "b" : 1 , "a" : [ true , null ] } `, `{"z":{"y":1,"x":2},"a":{}}`, `{"n":12345678901234567891}`,
		`"\u0041\/"`, `{"é":"ü"}`, `42`, `[]`, `{"amount":9007199254740993}`, `{"a":"1"}`, `[1,2]`, `{"a":null}`, `{}`,
		`{"a":1,"a":2}`, `{"x":{"a":1,"b":2,"a":1}}`, `{} {}`, `{"a":`, `amount=5`, ``, "\"\xff\"",
		`{"b":1,"a":[1,2,{"c":null}]}`, `"x"`, `1e400`, `{"a":1,"a":1}`, `[`,
		`{"a":{"b":[1,2,{"c":"\u00e9"}]},"a":0}`, `{"amount":12345678901234567891,"currency":"EUR","customerId":"c-1"}`,

		// Escapes, decoded then re-encoded as json.Marshal does.
		`"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u007f\u0080"`, `"\u00E9\u00e9"`, `"<>&"`, `"\u003c\u003E\u0026"`,
		"\"\u2028\u2029\"", `"\u2028\u2029\u202f"`, "\"\x7f\"", `"\ufffd"`, "\"\uFFFD\"", `"\uFEFF"`, "\"\uFEFF\"",
		`"\'"`, `"\x41"`, `"\U0041"`, `"\u004"`, `"\u00g1"`, `"\u"`, `"\`, `"\"`, "\"a\nb\"", "\"a\tb\"", "\"\x00\"",
		// Surrogates: pairs, lone halves, reversed pairs, a half then another escape.
		`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ud83d"`, `"\ude00"`, `"\ude00\ud83d"`, `"\ud83d\ud83d\ude00"`,
		`"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\n"`, `"\ud83d\"`, `"\ud83d\u00"`, `"\udbff\udfff"`, `"\ud800\udc00"`,
		"\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xc0\xaf\"", "\"😀\"",
		// Keys equal once decoded, or ordered differently raw and decoded.
		`{"a":1,"\u0061":2}`, `{"\ud800":1,"\udc00":2}`, `{"\ud800":1,"\ufffd":2}`, `{"é":1,"\u00e9":2}`,
		`{"\ud83d\ude00":1,"😀":2}`, `{"<":1,"=":2,";":3}`, `{"\u003c":1,"a":2,"\"":3,"\\":4}`,
		`{"b":1,"a":2,"b":3}`, `{"":1,"":2}`, `{"":0,"a":1}`, `{"aa":1,"a":2,"ab":3,"a\u0000":4}`,
		`{"é":1,"z":2,"e":3,"\u007f":4,"~":5}`, `{"x":{"b":1,"a":2},"x":{"a":2,"b":1}}`, `{"a":{"a":{"a":1}}}`,
		// Numbers: kept as written, or refused.
		`-0`, `0`, `-0.0`, `0e0`, `1E+2`, `1e-2`, `1E2`, `1.5e+10`, `-1.25E-300`, `1e999999999999`, `123456789012345678901234567890`,
		`0.1`, `01`, `-`, `-01`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `1.5.3`, `1e5e5`, `NaN`, `Infinity`, `-Infinity`, `[1,-]`,
		`[0,-0,1.0,1e0]`, `{"n":-0}`, `1 2`, `1-`, `[01]`, `[1x]`,
		// Literals.
		`true`, `false`, `null`, `tru`, `nul`, `nulll`, `True`, `NULL`, `[true,false,null]`, `[truex]`, `[nul]`,
		// White space: only space, tab, CR and LF.
		" \t\r\n{\t\"a\"\r:\n1 }\n", "\f{}", "\v[]", "\u00a0[]", "[1,\u00a02]", "\ufeff{}", " ", "\n", "[ ]", "{ }",
		// Structure.
		`[,]`, `[1,]`, `[,1]`, `[1,,2]`, `[1 2]`, `{,}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a"::1}`, `{"a":}`,
		`{1:2}`, `{a:1}`, `{"a":1 "b":2}`, `[}`, `{]`, `[1}`, `{"a":1]`, `]`, `}`, `:`, `,`, `[[]`, `[]]`, `{}}`,
		`[[],{},[{}],{"a":[]}]`, `{"a":[{"b":{}}]}`, `"a" "b"`, `[]x`, `{}1`, `"a"1`, "{}\x00", `{"a":1}garbage`,
		"[\"\u00e9\",\"\u00e9\"]", `{"a"}`, `{"a",}`, `{"a":1,"b"}`, `[:]`, `{:1}`,
		// Invalid UTF-8 is ErrInvalid before any other error, wherever it is.
		"[1,\xff]", "{\"a\":1}\xff", "\xff{}", "{\"a\":1,\"a\":2,\"b\":\"\xff\"}", "{\"a\":1,\"a\":2}\xc3",
		"{\"\xff\":1,\"\xff\":2}", "[\"\xe2\x80\xa8\xe2\x80\"]", "[\"\xe2\x80\xa8\", \"x\" 1, \"\xff\"]", "[tru\xff]",
		"{\"a\" \xff:1}", "[1e\xff]", "\"\xf0\x9f\x98\"", "\"abcdefg\xc3\"", "\"abcdefgh\xc3\"", "\"abcdefghijklmno\xe2\x80\"",
		strings.Repeat("[", canonjson.MaxDepth+2) + "\xff", strings.Repeat(`{"k":`, canonjson.MaxDepth+2) + "\"\xff\"",
		// '^', '|' and '~', which the string scan stops at, though written as
		// they are; and the bytes around '<', '>', '\\', '"' and '&'.
		`"^|~"`, `{"a^":1,"a|":2,"a~":3,"a":4}`, `["abcdefg^","abcdefgh|","abcdefghijklmno~","x"]`, "\"=?;[]{}#$%'()*+,-./:@_`\"",
		`{"~":1,"|":2,"^":3,"<":4,"\\":5,"]":6,"[":7,"=":8}`,
	}
	// Objects past the insertion sort's size (12 members): reversed, shuffled,
	// with a duplicate, with escaped keys.
	var reversed, dup []string
	for i := 30; i > 0; i-- {
		reversed = append(reversed, `"k`+string(rune('A'+i))+`":`+string(rune('0'+i%10)))
		dup = append(dup, `"\u006b`+string(rune('A'+i%17))+`":[]`)
	}
	in = append(in, "{"+strings.Join(reversed, ",")+"}", "{"+strings.Join(dup, ",")+"}",
		"{"+strings.Join(reversed[:13], ",")+"}", "{"+strings.Join(reversed[:12], ",")+"}",
		"{"+strings.Join(dup[:17], ",")+"}", "{"+strings.Join(dup[:18], ",")+"}")
	// Nesting at the limit: MaxDepth+1 levels hold values at depth MaxDepth.
	for _, n := range []int{canonjson.MaxDepth, canonjson.MaxDepth + 1, canonjson.MaxDepth + 2} {
		arrays := strings.Repeat("[", n)
		objects := strings.Repeat(`{"k":`, n)
		in = append(in,
			arrays+strings.Repeat("]", n), arrays+"1"+strings.Repeat("]", n), arrays+"]", arrays, arrays+",",
			arrays+"}", arrays+"1,", arrays+` ]`+strings.Repeat("]", n-1)+"x",
			objects+"1"+strings.Repeat("}", n), objects+"{}"+strings.Repeat("}", n), objects+`{"a" 1}`, objects+`{"a"`,
			objects+`{"a":1,"a":2}`+strings.Repeat("}", n), objects+"}", objects,
			`{"a":1,"a":`+arrays+strings.Repeat("]", n)+"}", `{"a":1,"a":2,"b":`+arrays,
			strings.Repeat(`[{"a":`, n/2)+"0"+strings.Repeat("}]", n/2),
			strings.Repeat(`{"b":0,"a":`, n)+"1"+strings.Repeat("}", n),
			strings.Repeat(`{"b":0,"b":`, n)+"1"+strings.Repeat("}", n),
			strings.Repeat(`[ {"b":0, "a":`, n/2)+"1"+strings.Repeat("} ]", n/2),
		)
	}
	return append(in, sortingInputs()...)
}()

// sortingInputs are objects at the edges of the member sort and reordering:
// sizes around its thresholds, already sorted or not, keys that share their
// first 8 bytes or are prefixes of each other, keys equal or ordered
// differently once unescaped, members copied from the input as written or
// re-encoded, with white space around, and the benchmark's documents.
func sortingInputs() []string {
	in := []string{
		`{"a":1,"b":2,"c":3}`, `{"a":{"a":1,"b":2},"b":[{"x":1,"y":2}]}`, `{"b":1,"a":2}`, `{"a":1}`, `{"a":{}}`,
		`{"customerId":1,"customerName":2,"customer":3,"customerI":4,"customerIdx":5}`,
		`{"abcdefgh":1,"abcdefg":2,"abcdefgh\u0000":3,"abcdefgh\u0001":4,"abcdefghi":5}`,
		`{"abcdefgh":1,"abcdefg\u0068":2}`, `{"abcdefghij":1,"\u0061bcdefghij":2}`, `{"customerId":1,"customer\u0049d":2}`,
		`{"aaaaaaaaaaaaaaab":1,"aaaaaaaaaaaaaaaa":2}`, `{"aaaaaaaaaaaaaaaa":1,"aaaaaaaaaaaaaaaa":2}`,
		`{"aaa":1,"aa":2,"a":3,"":4,"a\u0000":5,"\u0000":6}`, `{"a\u0000":1,"a":2,"a\u0000":3}`,
		`{"\u007a":1,"y":2}`, `{"\u0062":1,"a":2}`, `{"\u00e9":1,"f":2,"\u00e8":3}`, `{"z\n":1,"z\t":2,"z":3}`,
		`{"b":1,"b":2,"a":1,"a":2}`, `{"b":1,"a":1,"b":2,"a":2}`, `{"bb":1,"a":0,"bb":2,"a":1}`, `{"a":1,"b":2,"a":3,"b":4}`,
		`{"z<":1,"a":2}`, `{"<":1,"a":{"d":1,"c":2}}`, `{"b":"<","a":"&"}`, `{"b":"\u0041","a":"x"}`,
		`{"b":{"d":"\n","c":1},"a":2}`, `{"c":[{"b":1,"a":2},{"b":"é","a":"€"}],"b":{"y":{"q":1,"p":2},"x":0},"a":0}`,
		" {\n \"b\" : [ 1 , {\"d\" :1, \"c\":2} ] ,\t\"a\" : \"x\" } ", `{ "b":1,"a":2}`, `{"b" :1,"a":2}`,
		`{"b": 1,"a":2}`, `{"b":1 ,"a":2}`, `{"b":1, "a":2}`, `{"b":1,"a":2 }`, "{\"b\":{\"y\":1,\"x\":2}\n,\"a\":3}",
		"{\"\u2028\":1,\"\u2029\":2,\"…\":3,\"€\":4,\"\u2060\":5,\"a\":6}", "[\"…\u2028€\u2029\u2060\"]",
		"{\"é\":1,\"e\":2,\"\u00e9\":3}", "{\"日本\":1,\"日\":2}", "\"\xe2\x80\xa8\"", "\"\xe2\x80\xa7\xe2\x80\xaa\"",
		`[1.5]`, `[12e3]`, `[12E+3]`, `[1x]`, `[10]`, `{"b":123,"a":9}`, `123`, `12.`, `12e`, `[9,]`, `[12 ]`, `{"b":12}`, `-12`, `[1,23,456]`,
		// Arrays of objects with the same keys in the same order, sorted
		// once: with escaped keys, keys that differ past their prefix, a
		// member more or less, duplicates, and other shapes between.
		`[{"b":1,"a":2},{"b":3,"a":4},{"b":5,"a":6}]`, `[{"b":1,"a":2},{"\u0062":3,"a":4},{"b":5,"\u0061":6}]`,
		`[{"b":1,"a":2},{"b":3,"a":4,"c":5},{"b":6}]`, `[{"b":1,"a":2},{"b":3,"b":4},{"b":5,"a":6}]`,
		`[{"b":1,"a":2},{"a":3,"b":4},{"b":5,"a":6},{"a":7,"a":8}]`, `[{"zzzzzzzzA":1,"a":2},{"zzzzzzzzB":3,"a":4}]`,
		`[{"zzzzzzzz":1,"a":2},{"zzzzzzzzB":3,"a":4},{"zzzzzzzz":5,"zzzzzzzz":6}]`, `[{"b":{"d":1,"c":2},"a":[{"b":1,"a":2}]},{"b":{"d":3,"c":4},"a":[]}]`,
		// Member values after a key, taken apart from other values: strings
		// with escapes, numbers with a fraction or exponent, zero, negative,
		// broken, and the member after with white space or none.
		`{"b":"x\ny","a":"<"}`, `{"b":1.5,"a":2e3,"c":0,"d":-1,"e":10}`, `{"b":12,"a":1}`, `{"b":1 ,"a":2}`, `{"b":1, "a":2}`,
		`{"b":1,}`, `{"b":1,"`, `{"b":1,"a`, `{"b":1x}`, `{"b":"x"y}`, `{"b":"x`, `{"b":01}`, `{"b":1.}`, `{"b":9e}`,
		`{"abcdefghijk":1}`, `{"abcdefg":1}`, `{"abcdefgh":1}`, `{"a":1,"b":`, `{"ab":"cd"}`, `{"b":"x","a":"y"}`,
	}
	// Objects of n members around the sort's thresholds: sorted, reversed,
	// shuffled; without and with a duplicate, with escaped keys.
	for _, n := range []int{1, 2, 3, 12, 13, 16, 17, 100} {
		key := func(i int) string { return fmt.Sprintf("k%03d", i) }
		var sorted, reversed, shuffled, escaped []string
		for i := range n {
			sorted = append(sorted, fmt.Sprintf(`"%s":%d`, key(i), i))
			reversed = append(reversed, fmt.Sprintf(`"%s":{"b":%d,"a":0}`, key(n-1-i), i))
			shuffled = append(shuffled, fmt.Sprintf(`"%s":"v%d"`, key(i*7%n), i))
			escaped = append(escaped, fmt.Sprintf(`"\u006b%03d":[%d]`, (i*5+3)%n, i))
		}
		in = append(in,
			"{"+strings.Join(sorted, ",")+"}", "{"+strings.Join(reversed, ",")+"}",
			"{"+strings.Join(shuffled, ",")+"}", "{"+strings.Join(escaped, ",")+"}",
			"{ "+strings.Join(shuffled, " , ")+" }",
			"{"+strings.Join(append(shuffled, `"`+key(n/2)+`":0`), ",")+"}",
			"{"+strings.Join(append([]string{`"` + key(n-1) + `":0`}, sorted...), ",")+"}",
			"{"+strings.Join(append(escaped, `"`+key(0)+`":0`, `"`+key(n-1)+`":0`), ",")+"}",
		)
	}
	for _, b := range benchInputs {
		in = append(in, string(b.data))
	}
	return in
}

// TestDifferential checks the tricky inputs against the reference: the same
// canonical bytes, or the same error.
func TestDifferential(t *testing.T) {
	t.Parallel()
	for _, in := range trickyInputs {
		checkDifferential(t, []byte(in))
	}
}

// stringSpecials are what a string holds next to the 8 bytes at a time the
// scanner reads: escapes, the characters it escapes, past ASCII (2 to 4
// bytes, U+2028 and U+2029 and their neighbours), invalid UTF-8, control
// characters, '^', '|' and '~' (which it stops at, though it writes them as
// they are), and characters near those it stops at.
var stringSpecials = []string{
	`\"`, `\\`, `\n`, `\u0041`, `\ud83d\ude00`, `\ud83d`, "<", ">", "&", "^", "|", "~", "=", "]", "[", "!", "#", "'", "\x7f", " ",
	"é", "€", "😀", "\u2028", "\u2029", "\u2027", "\u202a", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\x00", "\x1f",
}

// TestDifferentialStringBoundaries checks strings of every length to 24 with
// a special character at every offset to 15 (stringSpecials), as values and
// keys, at the end of the input (where the scanner reads its last 8 bytes)
// and before 32 bytes more.
func TestDifferentialStringBoundaries(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("p", 32)
	for n := 0; n <= 24; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			base := strings.Repeat("abcdefgh", 4)[:n]
			for i := 0; i <= min(n, 15); i++ {
				for _, sp := range stringSpecials {
					str := `"` + base[:i] + sp + base[i:] + `"`
					for _, doc := range []string{
						str, `[` + str + `,"` + pad + `"]`, `{` + str + `:` + str + `}`,
						`{"m":0,` + str + `:1,"` + pad + `":2}`, `{` + str + `:0,"m":` + str + `}`,
					} {
						checkDifferential(t, []byte(doc))
					}
				}
			}
		})
	}
}

// TestDifferentialMemberCopy checks objects reordered as they are copied
// from the input, members about 32 bytes long (which the copy takes apart),
// members in order next to each other or not, with the object at the end of
// the input or before 32 bytes more.
func TestDifferentialMemberCopy(t *testing.T) {
	t.Parallel()
	member := func(key string, n int) string { return `"` + key + `":"` + strings.Repeat("v", n) + `"` }
	for n := 18; n <= 30; n++ {
		for _, keys := range [][]string{{"b", "a"}, {"c", "a", "b"}, {"b", "c", "a"}, {"d", "b", "c", "a"}, {"a", "c", "b", "d"}} {
			var ms []string
			for k, key := range keys {
				ms = append(ms, member(key, n+k%3))
			}
			obj := "{" + strings.Join(ms, ",") + "}"
			for _, doc := range []string{
				obj, "[" + obj + "]", "[" + obj + `,"` + strings.Repeat("p", 32) + `"]`, `{"z":` + obj + `,"a":` + obj + "}",
				"[" + obj + "," + obj + "]", `{"k":[` + obj + "]}",
			} {
				checkDifferential(t, []byte(doc))
			}
		}
	}
}

// TestDifferentialReorderRoom checks objects reordered in the output (a
// member rewritten before they close) whose text is around the 2 KB that
// reorder puts together on the stack, past which it uses its scratch
// buffer, twice in a document (the buffer reused), and with room to spare
// in dst (checkDifferential's roomy).
func TestDifferentialReorderRoom(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2000, 2020, 2030, 2031, 2032, 2033, 2040, 2047, 2048, 2049, 2050, 2100, 4096} {
		// {"z":{"b":1,"a":2},"y":"vvv…"}: the inner object moved, then the
		// outer one, n bytes from its first member to its '}'.
		head := `"z":{"b":1,"a":2},"y":"`
		obj := "{" + head + strings.Repeat("v", max(n-len(head)-1, 0)) + `"}`
		for _, doc := range []string{obj, "[" + obj + "," + obj + "]", `{"b":` + obj + `,"a":` + obj + "}"} {
			checkDifferential(t, []byte(doc))
		}
	}
}

// FuzzDifferential checks that Canonicalize and Append agree with the
// reference on every input: the same canonical bytes, or the same error.
// nest wraps the input in that many arrays and objects (modulo a little over
// MaxDepth), so the fuzzer reaches the depth limit, which random bytes
// seldom do.
func FuzzDifferential(f *testing.F) {
	for _, in := range trickyInputs {
		if len(in) < 256 {
			f.Add([]byte(in), uint16(0))
		}
	}
	for _, nest := range []uint16{1, 2, canonjson.MaxDepth - 1, canonjson.MaxDepth, canonjson.MaxDepth + 1} {
		for _, in := range []string{`1`, `[]`, `{}`, `{"a":1,"a":2}`, `[1,`, `{"a" 1}`, `"\ud800"`} {
			f.Add([]byte(in), nest)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, nest uint16) {
		checkDifferential(t, nested(in, int(nest)%(canonjson.MaxDepth+8)))
	})
}

// nested wraps in in n levels of arrays and objects, alternately.
func nested(in []byte, n int) []byte {
	if n == 0 {
		return in
	}
	var open, closing []byte
	for i := range n {
		if i%2 == 0 {
			open, closing = append(open, '['), append(closing, ']')
		} else {
			open, closing = append(open, `{"k":`...), append(closing, '}')
		}
	}
	out := append(open, in...)
	for i := len(closing) - 1; i >= 0; i-- {
		out = append(out, closing[i])
	}
	return out
}

// testingT is what checkDifferential needs of a *testing.T or a *rapid.T.
type testingT interface {
	require.TestingT
	Helper()
}

func checkDifferential(t testingT, in []byte) {
	t.Helper()
	want, wantErr := referenceCanonicalize(in)
	got, err := canonjson.Canonicalize(in)
	if wantErr != nil {
		require.Error(t, err, "accepted what the reference refuses (%v): %q -> %q", wantErr, in, got)
		require.Equal(t, errorClass(wantErr), errorClass(err), "%q: reference %v; got %v", in, wantErr, err)
		if !errors.Is(wantErr, canonjson.ErrInvalid) {
			// The duplicate key, quoted: the same in both.
			require.Equal(t, wantErr.Error(), err.Error(), "%q", in)
		}
		assert.Nil(t, got)
	} else {
		require.NoError(t, err, "refused what the reference accepts: %q -> %q", in, want)
		require.Equal(t, string(want), string(got), "input %q", in)
	}

	// Append agrees, after what dst holds, and leaves dst as it was on error.
	prefix := []byte("prefix:")
	appended, err := canonjson.Append(prefix, in)
	if wantErr != nil {
		require.Equal(t, errorClass(wantErr), errorClass(err))
		require.Equal(t, "prefix:", string(appended))
	} else {
		require.NoError(t, err)
		require.Equal(t, "prefix:"+string(want), string(appended))
	}

	// And after a dst with room to spare, which the objects reordered use.
	roomy := append(make([]byte, 0, 2*len(in)+64), "roomy:"...)
	appended2, err := canonjson.Append(roomy, in)
	if wantErr != nil {
		require.Equal(t, errorClass(wantErr), errorClass(err))
		require.Equal(t, "roomy:", string(appended2))
	} else {
		require.NoError(t, err)
		require.Equal(t, "roomy:"+string(want), string(appended2))
	}

	// The parser Append replaced returns the same bytes, and the same
	// error, message for message (the offset and what was expected).
	old, oldErr := canonjson.AppendRecursive(nil, in)
	if oldErr != nil {
		require.EqualError(t, err, oldErr.Error(), "%q", in)
	} else {
		require.NoError(t, err)
		require.Equal(t, string(old), string(appended[len(prefix):]), "%q", in)
	}
}

// errorClass names the sentinel an error wraps.
func errorClass(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, canonjson.ErrInvalid):
		return "invalid"
	case errors.Is(err, canonjson.ErrDuplicateKey):
		return "duplicate key"
	case errors.Is(err, canonjson.ErrTooDeep):
		return "too deep"
	}
	return "other: " + err.Error()
}

// TestDifferentialRapid checks generated documents against the reference:
// JSON values of every kind (nested up to past MaxDepth, keys that collide
// or sort differently once unescaped, escapes, characters past ASCII,
// numbers in every form, white space between tokens), as written or with a
// byte cut, inserted or replaced, so that invalid input is checked too.
func TestDifferentialRapid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		doc := []byte(jsonText(t, 0))
		if n := len(doc); n > 0 && rapid.Bool().Draw(t, "mutate") {
			at := rapid.IntRange(0, n-1).Draw(t, "at")
			b := rapid.SampledFrom([]byte("{}[],:\"\\ \t\n01-+.eEtfnu\x00\x1f\x7f\xc3\xa9\xe2\x80\xa8")).Draw(t, "byte")
			switch rapid.IntRange(0, 2).Draw(t, "how") {
			case 0:
				doc = append(doc[:at:at], doc[at+1:]...)
			case 1:
				doc = append(doc[:at:at], append([]byte{b}, doc[at:]...)...)
			default:
				doc[at] = b
			}
		}
		checkDifferential(t, doc)
	})
}

// jsonText draws a JSON value at depth, as text.
func jsonText(t *rapid.T, depth int) string {
	space := func() string {
		return rapid.SampledFrom([]string{"", "", "", " ", "\n\t", "\r\n  "}).Draw(t, "space")
	}
	kinds := 9
	if depth > 3 && !rapid.Bool().Draw(t, "deep") {
		kinds = 7 // mostly scalars past a few levels
	}
	switch rapid.IntRange(0, kinds).Draw(t, "kind") {
	case 0, 1:
		return jsonString(t)
	case 2, 3:
		return jsonNumber(t)
	case 4:
		return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "literal")
	case 5:
		if rapid.IntRange(0, 20).Draw(t, "tower") == 0 { // about MaxDepth, in arrays or objects
			n := rapid.IntRange(maxDepthAround()).Draw(t, "levels")
			if rapid.Bool().Draw(t, "arrays") {
				return strings.Repeat("[", n) + jsonNumber(t) + strings.Repeat("]", n)
			}
			return strings.Repeat(`{"k":`, n) + "0" + strings.Repeat("}", n)
		}
		return "[" + space() + "]"
	case 6, 7:
		return "{" + space() + "}"
	case 8:
		n := rapid.IntRange(1, 6).Draw(t, "elements")
		var elems []string
		for range n {
			elems = append(elems, space()+jsonText(t, depth+1)+space())
		}
		return "[" + strings.Join(elems, ",") + "]"
	default:
		n := rapid.IntRange(1, 16).Draw(t, "members")
		var members []string
		for range n {
			key := jsonKey(t)
			members = append(members, space()+key+space()+":"+space()+jsonText(t, depth+1)+space())
		}
		return "{" + strings.Join(members, ",") + "}"
	}
}

// maxDepthAround is the range of tower heights: either side of MaxDepth.
func maxDepthAround() (int, int) { return canonjson.MaxDepth - 2, canonjson.MaxDepth + 2 }

// jsonKey draws an object key from a small set, so that keys repeat (a
// duplicate, or the same key escaped) and share prefixes.
func jsonKey(t *rapid.T) string {
	return rapid.SampledFrom([]string{
		`"a"`, `"b"`, `"ab"`, `"a\u0000"`, `"\u0061"`, `"é"`, `"\u00e9"`, `"e"`, `""`, `"customerId"`,
		`"customerI"`, `"customerIdx"`, `"z"`, `"<"`, `"\u003c"`, `"\ud83d\ude00"`, `"😀"`, `"\ud800"`, `"\ufffd"`,
		`"k1"`, `"k2"`, `"k10"`, `"\n"`, `"\\"`, `"\""`,
	}).Draw(t, "key")
}

// jsonString draws a JSON string: plain runs, escapes of every kind
// (surrogates paired, lone and reversed), characters that the canonical
// form escapes, and characters past ASCII.
func jsonString(t *rapid.T) string {
	parts := rapid.SliceOfN(rapid.SampledFrom([]string{
		"abc", "Order 1001: 2 x red mug", "x", " ", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
		`\u0041`, `\u00e9`, `\u00E9`, `\u001f`, `\u2028`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ude00\ud83d`,
		"<", ">", "&", "\x7f", "é", "€", "😀", "\u2028", "\u2029", "\u2027", "\ufeff", "\ufffd",
	}), 0, 6).Draw(t, "parts")
	return `"` + strings.Join(parts, "") + `"`
}

// jsonNumber draws a number in any of JSON's forms, big ones included.
func jsonNumber(t *rapid.T) string {
	var sb strings.Builder
	if rapid.Bool().Draw(t, "minus") {
		sb.WriteByte('-')
	}
	if rapid.IntRange(0, 3).Draw(t, "zero") == 0 {
		sb.WriteByte('0')
	} else {
		sb.WriteString(rapid.StringMatching(`[1-9][0-9]{0,25}`).Draw(t, "int"))
	}
	if rapid.Bool().Draw(t, "fraction") {
		sb.WriteString(rapid.StringMatching(`\.[0-9]{1,20}`).Draw(t, "frac"))
	}
	if rapid.Bool().Draw(t, "exponent") {
		sb.WriteString(rapid.StringMatching(`[eE][+-]?[0-9]{1,5}`).Draw(t, "exp"))
	}
	return sb.String()
}
