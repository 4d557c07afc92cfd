package canonjson

import "unicode/utf8"

// AppendQuoted appends s to dst as a JSON string, exactly as json.Marshal
// writes a Go string: \" \\ \b \f \n \r \t for those bytes, \u00XX (lower-
// case hex) for the other control characters and for < > & (json.Marshal
// escapes HTML), \u2028 and \u2029 for those line separators, \ufffd for
// each byte that is not part of valid UTF-8, and every other character as
// itself, U+007F included. The canonical form writes its strings so, and so
// does the stored form of an HTTP response: both are stored formats, and
// this must never change.
func AppendQuoted(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// appendQuoted is AppendQuoted for a string or a byte slice (the canonical
// form's strings, read from its input).
func appendQuoted[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is still to be written as it is
	for i := 0; i < len(s); {
		c := s[i]
		if asIs[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf { // an ASCII escape, without escape's call: JSON text is full of quotes
			dst = append(append(dst, s[start:i]...), asciiEscapes[c]...)
			i++
			start = i
			continue
		}
		esc, size := escape(s, i)
		if esc != "" {
			dst = append(dst, s[start:i]...)
			dst = append(dst, esc...)
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// escape returns the escape AppendQuoted writes for the character at s[i],
// or "" if it writes the character as it is, and the character's length.
func escape[S string | []byte](s S, i int) (esc string, size int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiEscapes[c], 1
	}
	// At most 4 bytes, as a string: converting them allocates nothing.
	r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
	switch {
	case r == utf8.RuneError && size == 1: // not valid UTF-8
		return `\ufffd`, 1
	case r == '\u2028':
		return `\u2028`, size
	case r == '\u2029':
		return `\u2029`, size
	}
	return "", size
}

// asciiEscapes holds, for each ASCII byte, its escape in a JSON string as
// json.Marshal writes it, or "" for a byte written as it is.
var asciiEscapes = func() (t [utf8.RuneSelf]string) {
	const hexDigits = "0123456789abcdef"
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

// asIs says which bytes AppendQuoted writes as they are, whatever follows:
// the ASCII bytes with no escape.
var asIs = func() (t [256]bool) {
	for b, esc := range asciiEscapes {
		t[b] = esc == ""
	}
	return t
}()
