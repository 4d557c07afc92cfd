package canonjson

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// AppendQuoted appends s to dst as a JSON string, exactly as json.Marshal
// writes a Go string: \" \\ \b \f \n \r \t for those bytes, \u00XX (lower-
// case hex) for the other control characters and for < > & (json.Marshal
// escapes HTML), \u2028 and \u2029 for those line separators, \ufffd for
// each byte that is not part of valid UTF-8, and every other character as
// itself, U+007F included. The canonical form writes its strings so, and so
// does the stored form of an HTTP response: both are stored formats, and
// this must never change.
//
// When dst has spare capacity, bytes past the returned length within it may
// have been written.
func AppendQuoted(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// QuotedLen returns the length of AppendQuoted(nil, s) without writing it, so
// that a caller can size its output exactly.
func QuotedLen(s string) int {
	n := len(s) + 2
	i := 0
	for i+8 <= len(s) {
		if other, html, quote := classify(load64(s, i)); other == 0 {
			n += escapesExtra(html, quote)
			i += 8
			continue
		}
		for end := i + 8; i < end; { // a rune may end past the word
			extra, size := charExtra(s, i)
			n += extra
			i += size
		}
	}
	if i < len(s) && len(s) >= 8 {
		if other, html, quote := classify(tailWord(s, i)); other == 0 {
			return n + escapesExtra(html, quote)
		}
	}
	for i < len(s) {
		extra, size := charExtra(s, i)
		n += extra
		i += size
	}
	return n
}

// asciiEscapes holds, for each ASCII byte, its escape in a JSON string as
// json.Marshal writes it, or "" for a byte written as it is.
var asciiEscapes = func() (t [utf8.RuneSelf]string) {
	for b := range byte(utf8.RuneSelf) {
		switch b {
		case '"', '\\':
			t[b] = `\` + string(b)
		case '\b':
			t[b] = `\b`
		case '\f':
			t[b] = `\f`
		case '\n':
			t[b] = `\n`
		case '\r':
			t[b] = `\r`
		case '\t':
			t[b] = `\t`
		default:
			if b < ' ' || b == '<' || b == '>' || b == '&' {
				t[b] = `\u00` + string(hexDigits[b>>4]) + string(hexDigits[b&0xF])
			}
		}
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// asIs says which ASCII bytes appendQuoted writes as they are; shortEscapes
// holds, for each ASCII byte written as a two-byte escape, the escape's
// letter (" for \", n for \n...), and 0 for every other byte.
var asIs, shortEscapes = func() (plain [utf8.RuneSelf]bool, short [utf8.RuneSelf]byte) {
	for b, esc := range asciiEscapes {
		plain[b] = esc == ""
		if len(esc) == 2 {
			short[b] = esc[1]
		}
	}
	return plain, short
}()

// The string loops take 8 bytes at a time, as a little-endian word, and
// classify all 8 at once (SWAR): a class is a mask with the high bit of
// each of the word's bytes set where the byte is in the class.
const (
	lowBits  = 0x0101010101010101 // 1 in each byte
	highBits = 0x8080808080808080 // the high bit of each byte
	low7Bits = 0x7f7f7f7f7f7f7f7f
	plainRun = 0x6161616161616161 // "aaaaaaaa", written as it is
)

// load64 is the 8 bytes of s from i, as a little-endian word (one load).
func load64[S string | []byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// tailWord is the bytes of s from i to its end (len(s) >= 8, i in
// len(s)-7 to len(s)-1) as the low bytes of a word, the bytes above them
// plain: the tail of s classified at once, from its last 8 bytes.
func tailWord[S string | []byte](s S, i int) uint64 {
	shift := 8 * uint(i-(len(s)-8))
	return load64(s, len(s)-8)>>shift | plainRun<<(64-shift)
}

// classify marks the bytes of x that appendQuoted does not write as they
// are: other, the non-ASCII bytes and the control characters; html, < >
// and & (written \u00xx); quote, " and \ (written after a backslash).
// Each test is a sum whose high bit is clear for the bytes it finds: b+0x60
// for b < 0x20, and b^c+0x7f for b == c (< and >: b|2 == '>'). An ASCII
// byte's sums never carry into the next byte, so html and quote are exact
// when other is 0.
func classify(x uint64) (other, html, quote uint64) {
	notControl := x + 0x6060606060606060
	notLtGt := ((x | 0x0202020202020202) ^ 0x3e3e3e3e3e3e3e3e) + low7Bits
	notAmp := (x ^ 0x2626262626262626) + low7Bits
	notQuote := (x ^ 0x2222222222222222) + low7Bits
	notBackslash := (x ^ 0x5c5c5c5c5c5c5c5c) + low7Bits
	return (x | ^notControl) & highBits, highBits &^ (notLtGt & notAmp), highBits &^ (notQuote & notBackslash)
}

// escapesExtra is the bytes the escapes of a word's html and quote bytes
// add (5 and 1 each), from their masks: the sum of the word's bytes, one
// multiplication adding them up in its top byte (at most 40).
func escapesExtra(html, quote uint64) int {
	return int((5*(html>>7) + quote>>7) * lowBits >> 56)
}

// charExtra is, for the character at s[i], the bytes appendQuoted writes
// beyond its own, and its length in s.
func charExtra(s string, i int) (extra, size int) {
	if b := s[i]; b < utf8.RuneSelf {
		if asIs[b] {
			return 0, 1
		}
		return len(asciiEscapes[b]) - 1, 1
	}
	size, esc := multiByte(s, i)
	if esc == "" {
		return 0, size
	}
	return len(esc) - size, size
}

// multiByte returns the length of the character that starts with the byte
// s[i], not ASCII, and the escape appendQuoted writes for it, if any: 1 and
// \ufffd for a byte that does not start valid UTF-8 (as utf8.DecodeRune
// finds it), \u2028 and \u2029 for those. It decodes no rune: utf8 has no
// decoder of both strings and byte slices.
func multiByte[S string | []byte](s S, i int) (size int, esc string) {
	lo, hi := byte(0x80), byte(0xBF) // the second byte's range
	switch b := s[i]; {
	case 0xC2 <= b && b <= 0xDF:
		size = 2
	case b == 0xE0:
		size, lo = 3, 0xA0
	case b == 0xED:
		size, hi = 3, 0x9F // no surrogates
	case 0xE1 <= b && b <= 0xEF:
		size = 3
	case b == 0xF0:
		size, lo = 4, 0x90
	case b == 0xF4:
		size, hi = 4, 0x8F // up to U+10FFFF
	case 0xF1 <= b && b <= 0xF3:
		size = 4
	default:
		return 1, `\ufffd`
	}
	if len(s)-i < size || s[i+1] < lo || s[i+1] > hi ||
		size > 2 && s[i+2]&0xC0 != 0x80 || size > 3 && s[i+3]&0xC0 != 0x80 {
		return 1, `\ufffd`
	}
	if size == 3 && s[i] == 0xE2 && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8 {
		if s[i+2] == 0xA8 {
			return 3, `\u2028`
		}
		return 3, `\u2029`
	}
	return size, ""
}

// appendQuoted is AppendQuoted for a string or a byte slice (the canonical
// form's strings). It takes s 8 bytes at a time: a word of ASCII bytes with
// nothing to escape but " and \ (most of a JSON body's) is written by
// appendWord without a branch per byte; any other, character by character,
// the runs written as they are copied at once.
func appendQuoted[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start, i := 0, 0 // s[start:i] is still to be written as it is
	for i+8 <= len(s) {
		x := load64(s, i)
		other, html, quote := classify(x)
		if other|html != 0 {
			// Character by character to the end of the word, or of s if it
			// is near: escapes mostly come close together, and the words
			// would not pay.
			end := i + 8
			if len(s)-i < 32 {
				end = len(s)
			}
			dst, start, i = appendChars(dst, s, start, i, end)
			continue
		}
		if start < i {
			dst = append(dst, s[start:i]...)
		}
		dst = appendWord(dst, x, quote, 8)
		i += 8
		start = i
	}
	if i < len(s) {
		if len(s) >= 8 {
			x := tailWord(s, i)
			if other, html, quote := classify(x); other|html == 0 {
				if start < i {
					dst = append(dst, s[start:i]...)
				}
				dst = appendWord(dst, x, quote, len(s)-i)
				return append(dst, '"')
			}
		}
		dst, start, _ = appendChars(dst, s, start, i, len(s))
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendWord appends the low n bytes of x, ASCII bytes with nothing to
// escape but those q marks (" and \), each of those after a backslash.
func appendWord(dst []byte, x, q uint64, n int) []byte {
	l := len(dst)
	if q == 0 && cap(dst)-l >= 8 {
		dst = dst[:l+8]
		binary.LittleEndian.PutUint64(dst[l:], x)
		return dst[:l+n]
	}
	// The word is written 8 bytes at a time from its next byte to write,
	// each escaped byte written again after a backslash: at most 16 bytes
	// written, and 8 more stored past them.
	var scratch [24]byte
	out := &scratch
	direct := cap(dst)-l >= len(out)
	if direct {
		out = (*[24]byte)(dst[l : l+len(out)])
	}
	j := 0
	for q != 0 {
		shift := uint(bits.TrailingZeros64(q)) & 56 // 8 times k, the next byte to escape
		k := int(shift >> 3)
		binary.LittleEndian.PutUint64(out[j&15:], x)
		j += k
		out[j&15] = '\\'
		j++
		x >>= shift // the escaped byte first, written by the next store
		q = q >> shift &^ 0x80
		n -= k
	}
	binary.LittleEndian.PutUint64(out[j&15:], x)
	j += n
	if direct {
		return dst[:l+j]
	}
	return append(dst, scratch[:j]...)
}

// appendChars appends the characters of s from i to end or just past it
// (a rune may end past it), as appendQuoted: s[start:i] and the bytes
// written as they are stay to be written, up to the first escape.
func appendChars[S string | []byte](dst []byte, s S, start, i, end int) ([]byte, int, int) {
	for i < end {
		b := s[i]
		if b < utf8.RuneSelf {
			if asIs[b] {
				i++
				continue
			}
			if start < i {
				dst = append(dst, s[start:i]...)
			}
			if e := shortEscapes[b]; e != 0 {
				dst = append(dst, '\\', e)
			} else { // byte by byte: appending the 6 bytes of a string calls memmove
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		size, esc := multiByte(s, i)
		if esc != "" {
			dst = append(dst, s[start:i]...)
			dst = append(dst, esc...)
			start = i + size
		}
		i += size
	}
	return dst, start, i
}
