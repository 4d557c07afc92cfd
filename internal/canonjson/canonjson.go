package canonjson

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 512

// Errors returned by Canonicalize.
var (
	ErrInvalid      = errors.New("canonjson: invalid JSON")
	ErrDuplicateKey = errors.New("canonjson: duplicate object key")
	ErrTooDeep      = errors.New("canonjson: nesting too deep")
)

// Canonicalize returns the canonical form of one JSON value: objects with keys
// sorted by their UTF-8 bytes, no insignificant white space, strings re-escaped
// the way encoding/json writes them, and numbers kept exactly as written (so
// 12345678901234567891 and 12345678901234567890 stay distinct). Duplicate object
// keys, invalid UTF-8, trailing data and nesting deeper than MaxDepth are errors.
func Canonicalize(data []byte) ([]byte, error) {
	// The canonical form is rarely longer than the input (only escapes such
	// as \u003c for < make it so): one allocation in the common case.
	out, err := Append(make([]byte, 0, len(data)), data)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Append appends the canonical form of data (see Canonicalize) to dst and
// returns the extended buffer. On error it returns dst unchanged in length,
// though bytes past its length, within its capacity, may have been written.
// dst's spare capacity must not hold data: the output is written there as
// data is read.
//
// The canonical form is a stored format (it is hashed into request
// fingerprints): it must never change for a given input. The tests hold the
// first implementation, built on encoding/json, as its definition.
func Append(dst, data []byte) ([]byte, error) {
	// Checked over the whole input first, as the first implementation did:
	// invalid UTF-8 anywhere is ErrInvalid, before any other error, and the
	// string scanner below can take multi-byte sequences as valid.
	if !utf8.Valid(data) {
		return dst, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	p := parsers.Get().(*parser)
	defer p.release()
	p.data = data
	out, err := p.value(dst, 0, 0)
	if err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return dst, p.invalid("trailing data")
	}
	return out, nil
}

// parsers reuse the scratch buffers of a parse: the member and key stacks
// and the buffer objects are reordered through.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// maxPooled bounds the scratch kept for reuse (bytes; members count 64): one
// huge document must not pin its buffers in the pool.
const maxPooled = 64 << 10

// parser is one pass over a document: it checks the syntax as it appends the
// canonical form to the output, left to right, and sorts each object's members in
// place once the object is closed. Errors are found in the order the first
// implementation found them (it walked encoding/json's Decoder.Token), which
// matters because callers tell ErrTooDeep and ErrDuplicateKey apart from
// ErrInvalid: a depth check comes before the separator (',' or ':') of the
// value it guards, and duplicates are found when their object closes.
//
// The output is passed along and returned rather than kept in the parser:
// the parser lives on the heap, and storing a slice there at every append
// would cost a GC write barrier each time.
type parser struct {
	data []byte
	pos  int

	members []member // the members of every object open, innermost last
	keys    []byte   // decoded keys that held escapes, of the objects open
	scratch []byte   // a string's decoded content; an object's members while reordered
}

// member is one object member as written to the output, `"key":value` in
// out[start:end], with its decoded key (what members are sorted and compared
// by): data[keyOff:keyEnd], or keys[keyOff:keyEnd] if it held escapes.
type member struct {
	keyOff, keyEnd int
	escaped        bool
	start, end     int
}

func (p *parser) release() {
	p.data, p.pos = nil, 0
	p.members = p.members[:0]
	p.keys = p.keys[:0]
	p.scratch = p.scratch[:0]
	if cap(p.members) > maxPooled/64 || cap(p.keys) > maxPooled || cap(p.scratch) > maxPooled {
		return // let it go rather than keep it
	}
	parsers.Put(p)
}

func (p *parser) key(m *member) []byte {
	if m.escaped {
		return p.keys[m.keyOff:m.keyEnd]
	}
	return p.data[m.keyOff:m.keyEnd]
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// invalid returns ErrInvalid, saying what was wrong where.
func (p *parser) invalid(what string) error {
	if p.pos >= len(p.data) {
		return fmt.Errorf("%w: %s: unexpected end of input", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s: unexpected %q at offset %d", ErrInvalid, what, p.data[p.pos], p.pos)
}

// value parses one value nested depth deep (the document is depth 0), after
// the separator sep (',' in an array, ':' in an object; 0 for none), and
// appends its canonical form to out.
func (p *parser) value(out []byte, depth int, sep byte) ([]byte, error) {
	if depth > MaxDepth {
		return nil, ErrTooDeep
	}
	p.skipSpace()
	if sep != 0 {
		if p.pos >= len(p.data) || p.data[p.pos] != sep {
			return nil, p.invalid("expected " + string(sep))
		}
		p.pos++
		p.skipSpace()
	}
	if p.pos >= len(p.data) {
		return nil, p.invalid("expected a value")
	}
	switch c := p.data[p.pos]; c {
	case '{':
		return p.object(out, depth)
	case '[':
		return p.array(out, depth)
	case '"':
		start := p.pos
		s, escaped, plain, err := p.str()
		if err != nil {
			return nil, err
		}
		if !escaped && plain {
			return append(out, p.data[start:p.pos]...), nil // written as it is
		}
		return appendString(out, s), nil
	case 't':
		return p.literal(out, "true")
	case 'f':
		return p.literal(out, "false")
	case 'n':
		return p.literal(out, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return p.number(out)
		}
		return nil, p.invalid("expected a value")
	}
}

func (p *parser) literal(out []byte, lit string) ([]byte, error) {
	if end := p.pos + len(lit); end > len(p.data) || string(p.data[p.pos:end]) != lit {
		return nil, p.invalid("in literal " + lit)
	}
	p.pos += len(lit)
	return append(out, lit...), nil
}

// number copies a number as written, after checking its syntax:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What follows it is the
// caller's to check, as in encoding/json's scanner.
func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		return nil, p.invalid("in number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.invalid("after decimal point in number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.invalid("in exponent of number")
		}
	}
	return append(out, p.data[start:p.pos]...), nil
}

// digits skips decimal digits and says how many.
func (p *parser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

// array parses the array at p.pos, itself nested depth deep.
func (p *parser) array(out []byte, depth int) ([]byte, error) {
	p.pos++
	out = append(out, '[')
	for n := 0; ; n++ {
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.invalid("in array")
		}
		switch p.data[p.pos] {
		case ']':
			p.pos++
			return append(out, ']'), nil
		case '}':
			return nil, p.invalid("in array")
		}
		var sep byte
		if n > 0 {
			sep = ','
			out = append(out, ',')
		}
		var err error
		if out, err = p.value(out, depth+1, sep); err != nil {
			return nil, err
		}
	}
}

// object parses the object at p.pos, itself nested depth deep, and writes
// its members sorted by their decoded keys' bytes.
func (p *parser) object(out []byte, depth int) ([]byte, error) {
	p.pos++
	out = append(out, '{')
	base, keysBase := len(p.members), len(p.keys)
	for n := 0; ; n++ {
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.invalid("in object")
		}
		switch p.data[p.pos] {
		case '}':
			p.pos++
			err := p.sortMembers(out, base)
			p.members, p.keys = p.members[:base], p.keys[:keysBase]
			if err != nil {
				return nil, err
			}
			return append(out, '}'), nil
		case ']':
			return nil, p.invalid("in object")
		}
		if n > 0 {
			if p.data[p.pos] != ',' {
				return nil, p.invalid("after object member")
			}
			p.pos++
			p.skipSpace()
			out = append(out, ',')
		}
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.invalid("expected object key")
		}
		m := member{start: len(out)}
		k, escaped, _, err := p.str()
		if err != nil {
			return nil, err
		}
		if !escaped {
			// k is data[p.pos-1-len(k):p.pos-1], referenced in place.
			m.keyOff, m.keyEnd = p.pos-1-len(k), p.pos-1
		} else {
			m.keyOff = len(p.keys)
			p.keys = append(p.keys, k...)
			m.keyEnd, m.escaped = len(p.keys), true
		}
		out = append(appendString(out, k), ':')
		if out, err = p.value(out, depth+1, ':'); err != nil {
			return nil, err
		}
		m.end = len(out)
		p.members = append(p.members, m)
	}
}

// sortMembers sorts the members of the object that closed (p.members[base:])
// by their decoded keys' bytes, rewriting its part of out in place in that
// order, and refuses a key that appears twice.
func (p *parser) sortMembers(out []byte, base int) error {
	ms := p.members[base:]
	if len(ms) < 2 {
		return nil
	}
	first := ms[0].start // where the members begin in out, before sorting
	sorted := true
	for i := 1; i < len(ms); i++ {
		if bytes.Compare(p.key(&ms[i-1]), p.key(&ms[i])) > 0 {
			sorted = false
			break
		}
	}
	switch {
	case sorted:
	case len(ms) <= 12:
		// Objects are mostly small: an insertion sort in place, without
		// SortFunc's copies of members through a closure.
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && bytes.Compare(p.key(&ms[j-1]), p.key(&ms[j])) > 0; j-- {
				ms[j-1], ms[j] = ms[j], ms[j-1]
			}
		}
	default:
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(p.key(&a), p.key(&b)) })
	}
	for i := 1; i < len(ms); i++ {
		if k := p.key(&ms[i]); bytes.Equal(p.key(&ms[i-1]), k) {
			return fmt.Errorf("%w: %q", ErrDuplicateKey, k)
		}
	}
	if sorted {
		return nil
	}
	// The members are written in out, separated by commas, from the first
	// member's start to the end: copy them aside and write them back in
	// order. The length does not change, so the offsets the enclosing
	// objects hold stay right.
	p.scratch = append(p.scratch[:0], out[first:]...)
	w := first
	for i, m := range ms {
		if i > 0 {
			out[w] = ','
			w++
		}
		w += copy(out[w:], p.scratch[m.start-first:m.end-first])
	}
	return nil
}

// str parses the string at p.pos (its opening quote) and returns its
// content decoded, whether it held escapes (if not, the content is a slice
// of data, else of p.scratch, valid until the next call), and whether its
// bytes are all plain (appendString writes them as they are). The syntax is
// JSON's: no control characters, and only the escapes \" \\ \/ \b \f \n \r
// \t \uXXXX.
func (p *parser) str() (s []byte, escaped, plain bool, err error) {
	data := p.data
	start := p.pos + 1
	i := start
	plain = true
	for {
		// A local index and one table look-up per byte: this loop is most
		// of the time spent on typical documents.
		for i < len(data) && plainBytes[data[i]] {
			i++
		}
		if i >= len(data) {
			p.pos = i
			return nil, false, false, p.invalid("in string")
		}
		switch c := data[i]; {
		case c == '"':
			p.pos = i + 1
			if escaped {
				return p.unescape(data[start:i]), true, false, nil
			}
			return data[start:i], false, plain, nil
		case c == '\\':
			escaped = true
			i++
			if i >= len(data) {
				p.pos = i
				return nil, false, false, p.invalid("in string escape")
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				if hex4(data[i:]) < 0 {
					p.pos = i
					return nil, false, false, p.invalid(`in \u escape`)
				}
				i += 4
			default:
				p.pos = i
				return nil, false, false, p.invalid("in string escape")
			}
		case c < 0x20:
			p.pos = i
			return nil, false, false, p.invalid("in string (a control character)")
		default:
			// < > & or a byte of a multi-byte sequence (Append checked that
			// the input is valid UTF-8): valid, but appendString has work.
			plain = false
			i++
		}
	}
}

// unescape decodes the content of a string whose syntax str checked, into
// p.scratch, as encoding/json does: a \u escape of a UTF-16 surrogate is
// joined with a following \u escape of its pair, and one that has no pair
// becomes U+FFFD alone (the escape after it is decoded by itself).
func (p *parser) unescape(s []byte) []byte {
	b := p.scratch[:0]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
			continue
		}
		switch e := s[i+1]; e {
		case 'u':
			r := rune(hex4(s[i+2:]))
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 = rune(hex4(s[i+2:]))
				}
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			b = append(b, unescapes[e])
			i += 2
		}
	}
	p.scratch = b
	return b
}

// unescapes maps the byte after a backslash to the byte it stands for.
var unescapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 returns the value of the 4 hex digits b starts with, or -1.
func hex4(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	v := 0
	for _, c := range b[:4] {
		d := hexDigit(c)
		if d < 0 {
			return -1
		}
		v = v<<4 | d
	}
	return v
}

func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// appendString appends s, valid UTF-8, quoted as json.Marshal quotes a
// string (the canonical form is defined by it): \" \\ \b \f \n \r \t for
// those bytes, \u00XX (lower-case hex) for other control characters and for
// < > & (json.Marshal escapes HTML), \u2028 and \u2029 for those line
// separators, and every other character as itself, U+007F included.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainBytes[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// Not reached (s is valid UTF-8); what json.Marshal writes.
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// plainBytes says which bytes appendString writes as themselves, on their
// own: ASCII but control characters, " and \, and < > &. (Bytes of
// multi-byte characters are looked at a character at a time.)
var plainBytes = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()
