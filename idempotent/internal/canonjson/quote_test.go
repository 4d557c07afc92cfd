package canonjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// quoteSpecials are the characters AppendQuoted treats apart: escaped,
// HTML-escaped, U+2028/9, invalid UTF-8 (alone, cut short, surrogates and
// overlong forms encoded in UTF-8), and characters near them written as
// they are.
var quoteSpecials = []string{
	`"`, `\`, "<", ">", "&", "\n", "\b", "\f", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f", "/", "'",
	"é", "€", "😀", "\u2028", "\u2029", "\u2027", "\u202a", "\u202f", "\ufffd", "\ufeff",
	"\xff", "\xfe", "\x80", "\xc3", "\xc3\x28", "\xe2", "\xe2\x80", "\xe2\x80\xa8\xa9", "\xed\xa0\x80",
	"\xf4\x90\x80\x80", "\xc0\xaf", "\xf0\x9f\x98",
}

// requireQuoted requires AppendQuoted and its byte-slice twin to agree
// with json.Marshal on s, appending to a dst with and without spare
// capacity.
func requireQuoted(t require.TestingT, s string) {
	want, err := json.Marshal(s)
	require.NoError(t, err)
	for _, spare := range []int{0, 8, 64} {
		dst := make([]byte, 3, 3+spare)
		copy(dst, "p:x")
		require.Equal(t, "p:x"+string(want), string(canonjson.AppendQuoted(dst, s)), "%q, %d spare", s, spare)
		require.Equal(t, "p:x"+string(want), string(canonjson.AppendQuotedBytes(dst, []byte(s))), "%q as bytes, %d spare", s, spare)
	}
}

// TestAppendQuoted checks the special characters alone and together.
func TestAppendQuoted(t *testing.T) {
	t.Parallel()
	requireQuoted(t, "")
	requireQuoted(t, strings.Join(quoteSpecials, ""))
	requireQuoted(t, `{"paymentId":"pay_8e03978e40d5","status":"captured","amount":2500,"currency":"EUR"}`)
	requireQuoted(t, strings.Repeat("é<\"", 500))
	for _, s := range quoteSpecials {
		requireQuoted(t, s)
	}
}

// TestAppendQuotedWordBoundaries checks strings of every length to 40 with
// one special character at every position, and to 20 with two.
func TestAppendQuotedWordBoundaries(t *testing.T) {
	t.Parallel()
	for n := 0; n <= 40; n++ {
		base := strings.Repeat("ab", n)[:n]
		for i := 0; i <= n; i++ {
			for _, sp := range quoteSpecials {
				s := base[:i] + sp + base[i:]
				requireQuoted(t, s)
				if n > 20 {
					continue
				}
				for j := i; j <= len(s); j++ {
					for _, sp2 := range quoteSpecials[:5] {
						requireQuoted(t, s[:j]+sp2+s[j:])
					}
				}
			}
		}
		requireQuoted(t, strings.Repeat(`"`, n))
		requireQuoted(t, strings.Repeat(`\"`, n))
		requireQuoted(t, strings.Repeat(`a"`, n))
		requireQuoted(t, strings.Repeat(`<"`, n))
	}
}

// FuzzAppendQuoted requires json.Marshal's bytes for any string.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range quoteSpecials {
		f.Add(s + "abcdefgh" + s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		requireQuoted(t, s)
	})
}
