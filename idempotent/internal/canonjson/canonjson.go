package canonjson

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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
	// as \u003c for < make it so): one allocation for it in the common case.
	out, err := Append(make([]byte, 0, len(data)), data)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Append appends the canonical form of data (see Canonicalize) to dst and
// returns the extended buffer. On error it returns dst unchanged in length,
// though bytes past its length, within its capacity, may have been written.
// dst's spare capacity must not hold data.
//
// The canonical form is a stored format (it is hashed into request
// fingerprints): it must never change for a given input. The tests hold the
// first implementation, built on encoding/json, as its definition.
func Append(dst, data []byte) ([]byte, error) {
	// Checked over the whole input first, as the first implementation did:
	// invalid UTF-8 anywhere is ErrInvalid, before any other error.
	if !utf8.Valid(data) {
		return dst, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	p := parser{text: data}
	out, err := p.value(dst, 0)
	if err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos < len(p.text) {
		return dst, p.invalid("trailing data")
	}
	return out, nil
}

// parser reads a JSON document by recursive descent, a method for each kind
// of value, each appending the value's canonical form to the output it is
// given and returning the extended output (as strconv's Append functions do).
//
// It returns the error the first implementation returns (reference_test.go,
// a walk of encoding/json's Decoder.Token), as callers tell ErrTooDeep and
// ErrDuplicateKey apart from ErrInvalid: it finds errors where the reference
// does, left to right as it reads tokens, which comes down to three rules
// beyond the syntax:
//   - an array's elements are too deep once the array has one (the next
//     byte is not ']', '}' or the end, as Decoder.More says), before that
//     element is read;
//   - an object member's value is too deep once its key is read, before
//     the ':' is;
//   - a duplicate key is found when its object closes, after all of its
//     members were read (the reference sorts them then), and the least key
//     that appears twice is named.
type parser struct {
	text      []byte // the document
	pos       int    // the next byte of text to read
	unescaped []byte // the strings that held escapes, decoded, one after another
	scratch   []byte // an object's members while they are reordered, when the output has no room for them
}

// invalid returns ErrInvalid, saying what was wrong at p.pos.
func (p *parser) invalid(what string) error {
	if p.pos >= len(p.text) {
		return fmt.Errorf("%w: %s: unexpected end of input", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s: unexpected %q at offset %d", ErrInvalid, what, p.text[p.pos], p.pos)
}

// skipSpace skips JSON's white space: space, tab, CR and LF.
func (p *parser) skipSpace() {
	for p.pos < len(p.text) {
		switch p.text[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// consume reads c if it is the next byte, and reports whether it was.
func (p *parser) consume(c byte) bool {
	if p.pos < len(p.text) && p.text[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

// value reads the value after the white space at p.pos. depth is its
// depth, which the caller checked.
func (p *parser) value(out []byte, depth int) ([]byte, error) {
	p.skipSpace()
	if p.pos == len(p.text) {
		return nil, p.invalid("expected a value")
	}
	switch c := p.text[p.pos]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		out, _, err := p.string(out)
		return out, err
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number(out)
	}
	return nil, p.invalid("expected a value")
}

func (p *parser) literal(out []byte, word string) ([]byte, error) {
	if !bytes.HasPrefix(p.text[p.pos:], []byte(word)) {
		return nil, p.invalid("in literal " + word)
	}
	p.pos += len(word)
	return append(out, word...), nil
}

// number reads a number, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?,
// and appends it as written. What follows it is the caller's to check, as
// in encoding/json's scanner (01 is the number 0, then an unexpected 1).
func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	p.consume('-')
	if !p.consume('0') && p.digits() == 0 {
		return nil, p.invalid("in number")
	}
	if p.consume('.') && p.digits() == 0 {
		return nil, p.invalid("after decimal point in number")
	}
	if p.consume('e') || p.consume('E') {
		if !p.consume('+') {
			p.consume('-')
		}
		if p.digits() == 0 {
			return nil, p.invalid("in exponent of number")
		}
	}
	return append(out, p.text[start:p.pos]...), nil
}

// digits reads decimal digits and returns how many.
func (p *parser) digits() int {
	start := p.pos
	for p.pos < len(p.text) && '0' <= p.text[p.pos] && p.text[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

// string reads the string whose opening quote is at p.pos and appends it
// as AppendQuoted writes its content. Its syntax is JSON's: no control
// characters, and only the escapes \" \\ \/ \b \f \n \r \t and \uXXXX. It
// returns its content, decoded: a slice of text, or of p.unescaped if it
// held escapes.
func (p *parser) string(out []byte) (_, content []byte, err error) {
	// Most strings are written as they are (rewrite says otherwise): the
	// bytes asIs stand for themselves, and the loop stops at the others.
	escaped, rewrite := false, false
	for i := p.pos + 1; ; i++ {
		for i < len(p.text) && asIs[p.text[i]] {
			i++
		}
		if i == len(p.text) {
			p.pos = i
			return nil, nil, p.invalid("in string")
		}
		switch c := p.text[i]; {
		case c == '"':
			content = p.text[p.pos+1 : i]
			if escaped {
				n := len(p.unescaped)
				p.unescaped = unescape(p.unescaped, content)
				content = p.unescaped[n:]
			}
			if rewrite {
				out = appendQuoted(out, content)
			} else {
				out = append(out, p.text[p.pos:i+1]...)
			}
			p.pos = i + 1
			return out, content, nil
		case c == '\\':
			escaped, rewrite = true, true
			i++
			switch {
			case i == len(p.text):
				i-- // the end, found above
			case p.text[i] == 'u' && hex4(p.text[i+1:]) >= 0:
				i += 4
			case unescapes[p.text[i]] != 0:
			default:
				p.pos = i
				return nil, nil, p.invalid("in string escape")
			}
		case c < ' ':
			p.pos = i
			return nil, nil, p.invalid("in string (a control character)")
		default: // < > &, or a character past ASCII: escaped, or maybe
			rewrite = true
		}
	}
}

// unescapes maps the byte after a backslash to the byte it stands for, and
// every byte that cannot follow one to 0 (u, the start of \uXXXX, too).
var unescapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape appends the decoded content of a string whose syntax p.string
// checked to b, as encoding/json decodes it: a \u escape of a UTF-16
// surrogate is joined with a following \u escape of its pair, and one that
// has no pair becomes U+FFFD alone (an escape after it is decoded by itself).
func unescape(b, s []byte) []byte {
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b = append(b, s[i])
			i++
			continue
		}
		if s[i+1] != 'u' {
			b = append(b, unescapes[s[i+1]])
			i += 2
			continue
		}
		r := hex4(s[i+2:])
		i += 6
		if utf16.IsSurrogate(r) {
			pair := utf8.RuneError
			if bytes.HasPrefix(s[i:], []byte(`\u`)) {
				pair = utf16.DecodeRune(r, hex4(s[i+2:]))
			}
			if r = pair; r != utf8.RuneError {
				i += 6
			}
		}
		b = utf8.AppendRune(b, r)
	}
	return b
}

// hex4 returns the value of the 4 hex digits s starts with, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// array reads the array whose '[' is at p.pos, at depth.
func (p *parser) array(out []byte, depth int) ([]byte, error) {
	p.pos++
	out = append(out, '[')
	p.skipSpace()
	if p.consume(']') {
		return append(out, ']'), nil
	}
	if p.pos == len(p.text) || p.text[p.pos] == '}' {
		return nil, p.invalid("in array")
	}
	if depth+1 > MaxDepth {
		return nil, ErrTooDeep
	}
	for {
		var err error
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		p.skipSpace()
		switch {
		case p.consume(','):
			out = append(out, ',')
		case p.consume(']'):
			return append(out, ']'), nil
		default:
			return nil, p.invalid("in array")
		}
	}
}

// member is an object member read: where its decoded key is, and where it
// was written in the output, as `"key":value`.
type member struct {
	key        []byte
	start, end int
}

// object reads the object whose '{' is at p.pos, at depth: it appends its
// members as they come, then sorts them by key where they were written.
func (p *parser) object(out []byte, depth int) ([]byte, error) {
	p.pos++
	p.skipSpace()
	if p.consume('}') {
		return append(out, "{}"...), nil
	}
	out = append(out, '{')
	var room [8]member // most objects' members, on the stack
	members := room[:0]
	for {
		if p.pos == len(p.text) || p.text[p.pos] != '"' {
			return nil, p.invalid("expected object key")
		}
		start := len(out)
		var key []byte
		var err error
		if out, key, err = p.string(out); err != nil {
			return nil, err
		}
		if depth+1 > MaxDepth {
			return nil, ErrTooDeep
		}
		p.skipSpace()
		if !p.consume(':') {
			return nil, p.invalid("expected :")
		}
		if out, err = p.value(append(out, ':'), depth+1); err != nil {
			return nil, err
		}
		members = append(members, member{key: key, start: start, end: len(out)})
		p.skipSpace()
		if p.consume('}') {
			break
		}
		if !p.consume(',') {
			return nil, p.invalid("in object")
		}
		out = append(out, ',')
		p.skipSpace()
	}
	out, err := p.sortMembers(out, members)
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// sortMembers sorts the members of an object, which end out, by key,
// checking that none appears twice, and rewrites them in order where they
// are: the object's length does not change, so the offsets of the members
// of the objects around it stay right. The sorted members are put together
// past the end of out first, when its spare capacity has room for them (a
// caller that gives it as much room again as the input saves an
// allocation: nethttp does), else in a scratch buffer.
func (p *parser) sortMembers(out []byte, ms []member) ([]byte, error) {
	var room [16]int
	order := room[:0] // indexes into ms, sorted rather than the members
	for i := range ms {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(ms[a].key, ms[b].key) })
	moved := false
	for k := 1; k < len(order); k++ {
		if key := ms[order[k]].key; bytes.Equal(ms[order[k-1]].key, key) {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateKey, key)
		}
		moved = moved || order[k] < order[k-1]
	}
	if !moved {
		return out, nil
	}
	from, end := ms[0].start, len(out) // the members, in out
	inOut := cap(out)-end >= end-from
	sorted := out[end:end]
	if !inOut {
		if p.scratch == nil { // one buffer for most documents' objects
			p.scratch = make([]byte, 0, len(p.text))
		}
		sorted = p.scratch[:0]
	}
	for k, i := range order {
		if k > 0 {
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, out[ms[i].start:ms[i].end]...)
	}
	copy(out[from:end], sorted)
	if !inOut {
		p.scratch = sorted // grown or not, for the next object
	}
	return out, nil
}
