package canonjson

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestMultiByte checks multiByte against utf8.DecodeRune: every first byte
// past ASCII, every second byte, third and fourth bytes of every class
// (ASCII, each continuation range, lead bytes, 0xFF), cut short at every
// length.
func TestMultiByte(t *testing.T) {
	t.Parallel()
	others := []byte{0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xA8, 0xA9, 0xBF, 0xC0, 0xC2, 0xE2, 0xF4, 0xFF}
	for b0 := 0x80; b0 <= 0xFF; b0++ {
		for b1 := range 256 {
			for _, b2 := range others {
				for _, b3 := range others {
					full := []byte{byte(b0), byte(b1), b2, b3}
					for n := 1; n <= len(full); n++ {
						s := full[:n]
						r, size := utf8.DecodeRune(s)
						want := ""
						switch {
						case r == utf8.RuneError && size == 1:
							want = `\ufffd`
						case r == '\u2028':
							want = `\u2028`
						case r == '\u2029':
							want = `\u2029`
						}
						// require only on a difference: it is slow for 33 million checks.
						if gotSize, got := multiByte(s, 0); gotSize != size || got != want {
							require.Equal(t, [2]any{size, want}, [2]any{gotSize, got}, "% x", s)
						}
						if gotSize, got := multiByte(string(s), 0); gotSize != size || got != want {
							require.Equal(t, [2]any{size, want}, [2]any{gotSize, got}, "% x as a string", s)
						}
					}
				}
			}
		}
	}
}
