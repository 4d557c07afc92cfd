package canonjson

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"
)

// appendRecursive is the recursive descent parser that Append replaced
// (v0.x, up to the iterative scanner): the tests hold it as the definition
// of Append's errors, message for message (TestDifferential and the others
// compare them), as the reference (reference_test.go) defines its output
// and error classes. Do not change it.
func appendRecursive(dst, data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return dst, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	p := recParser{text: data, out: dst}
	if err := p.value(0); err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos < len(p.text) {
		return dst, p.invalid("trailing data")
	}
	p.flush(p.pos)
	return p.out, nil
}

// recParser reads a JSON document by recursive descent, a method for each kind
// of value. Most of a document's canonical form is its text as it is: the
// parser writes nothing for a value it reads until its text and the
// canonical form part (white space left out, a string re-escaped, an
// object's members reordered), and then writes the text read so far, as it
// is, in one copy (flush).
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
type recParser struct {
	text      []byte // the document
	pos       int    // the next byte of text to read
	out       []byte // the canonical form of text[:run]
	run       int    // text[run:pos] is canonical as it is, and not yet in out
	unescaped []byte // the strings that held escapes, decoded, one after another
	scratch   []byte // an object's members while they are reordered, when out has no room for them
}

// flush writes the text read as it is, up to i, to the output.
func (p *recParser) flush(i int) {
	p.out = append(p.out, p.text[p.run:i]...)
	p.run = i
}

// at returns where text[i], for i at or past run, lands in the output.
func (p *recParser) at(i int) int { return len(p.out) + i - p.run }

// invalid returns ErrInvalid, saying what was wrong at p.pos.
func (p *recParser) invalid(what string) error {
	if p.pos >= len(p.text) {
		return fmt.Errorf("%w: %s: unexpected end of input", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s: unexpected %q at offset %d", ErrInvalid, what, p.text[p.pos], p.pos)
}

// skipSpace skips JSON's white space (space, tab, CR and LF), which the
// output leaves out. A compact document has none, and the first test
// (inlined) is all it costs there.
func (p *recParser) skipSpace() {
	if p.pos < len(p.text) && p.text[p.pos] > ' ' {
		return
	}
	p.skipSpaces()
}

// skipSpaces is skipSpace's loop, not inlined, so that skipSpace is.
//
//go:noinline
func (p *recParser) skipSpaces() {
	s, i := p.text, p.pos
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	if i > p.pos {
		p.flush(p.pos)
		p.pos, p.run = i, i
	}
}

// consume reads c if it is the next byte, and reports whether it was.
func (p *recParser) consume(c byte) bool {
	if p.pos < len(p.text) && p.text[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

// value reads the value after the white space at p.pos. depth is its
// depth, which the caller checked.
func (p *recParser) value(depth int) error {
	p.skipSpace()
	if p.pos == len(p.text) {
		return p.invalid("expected a value")
	}
	switch c := p.text[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		_, err := p.string()
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return p.invalid("expected a value")
}

func (p *recParser) literal(word string) error {
	if !bytes.HasPrefix(p.text[p.pos:], []byte(word)) {
		return p.invalid("in literal " + word)
	}
	p.pos += len(word)
	return nil
}

// number reads a number, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?,
// which the output keeps as written. What follows it is the caller's to
// check, as in encoding/json's scanner (01 is the number 0, then an
// unexpected 1).
func (p *recParser) number() error {
	s, i := p.text, p.pos
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case recDigits(s, i) > i:
		i = recDigits(s, i)
	default:
		p.pos = i
		return p.invalid("in number")
	}
	if i < len(s) && s[i] == '.' {
		if i++; recDigits(s, i) == i {
			p.pos = i
			return p.invalid("after decimal point in number")
		}
		i = recDigits(s, i)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		if i++; i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if recDigits(s, i) == i {
			p.pos = i
			return p.invalid("in exponent of number")
		}
		i = recDigits(s, i)
	}
	p.pos = i
	return nil
}

// recDigits returns the end of the decimal recDigits at s[i:].
func recDigits(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// string reads the string whose opening quote is at p.pos. Its syntax is
// JSON's: no control characters, and only the escapes \" \\ \/ \b \f \n
// \r \t and \uXXXX. The output has it as AppendQuoted writes its content:
// as written, unless it holds an escape or a character AppendQuoted
// escapes. It returns its content, decoded: a slice of text, or of
// p.unescaped if it held escapes.
func (p *recParser) string() (content []byte, err error) {
	// The bytes asIs stand for themselves, and the loop stops at the others.
	s, start := p.text, p.pos
	escaped, rewrite := false, false
	for i := start + 1; ; i++ {
		for i < len(s) && asIs[s[i]] {
			i++
		}
		if i == len(s) {
			p.pos = i
			return nil, p.invalid("in string")
		}
		switch c := s[i]; {
		case c == '"':
			p.pos = i + 1
			content = s[start+1 : i]
			if escaped {
				n := len(p.unescaped)
				p.unescaped = unescape(p.unescaped, content)
				content = p.unescaped[n:]
			}
			if rewrite {
				p.flush(start)
				p.out = appendQuoted(p.out, content)
				p.run = p.pos
			}
			return content, nil
		case c == '\\':
			escaped, rewrite = true, true
			i++
			switch {
			case i == len(s):
				i-- // the end, found above
			case s[i] == 'u' && hex4(s[i+1:]) >= 0:
				i += 4
			case unescapes[s[i]] != 0:
			default:
				p.pos = i
				return nil, p.invalid("in string escape")
			}
		case c < ' ':
			p.pos = i
			return nil, p.invalid("in string (a control character)")
		default: // < > &, or a character past ASCII: escaped, or maybe
			rewrite = true
		}
	}
}

// array reads the array whose '[' is at p.pos, at depth.
func (p *recParser) array(depth int) error {
	p.pos++
	p.skipSpace()
	if p.consume(']') {
		return nil
	}
	if p.pos == len(p.text) || p.text[p.pos] == '}' {
		return p.invalid("in array")
	}
	if depth+1 > MaxDepth {
		return ErrTooDeep
	}
	for {
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.skipSpace()
		switch {
		case p.consume(','):
		case p.consume(']'):
			return nil
		default:
			return p.invalid("in array")
		}
	}
}

// recMember is an object member read: its decoded key, and where it lands in
// the output, as `"key":value`.
type recMember struct {
	key        []byte
	start, end int
}

// object reads the object whose '{' is at p.pos, at depth, then puts its
// members in order (sortMembers).
func (p *recParser) object(depth int) error {
	p.pos++
	p.skipSpace()
	if p.consume('}') {
		return nil
	}
	var room [8]recMember // most objects' members, on the stack
	members := room[:0]
	for {
		if p.pos == len(p.text) || p.text[p.pos] != '"' {
			return p.invalid("expected object key")
		}
		start := p.at(p.pos)
		key, err := p.string()
		if err != nil {
			return err
		}
		if depth+1 > MaxDepth {
			return ErrTooDeep
		}
		p.skipSpace()
		if !p.consume(':') {
			return p.invalid("expected :")
		}
		if err := p.value(depth + 1); err != nil {
			return err
		}
		members = append(members, recMember{key: key, start: start, end: p.at(p.pos)})
		p.skipSpace()
		if p.consume('}') {
			return p.sortMembers(members)
		}
		if !p.consume(',') {
			return p.invalid("in object")
		}
		p.skipSpace()
	}
}

// sortMembers sorts the members of the object just read by key, checking
// that none appears twice, and rewrites them in order where they are in the
// output: the object's length does not change, so the offsets of the
// members of the objects around it stay right. The sorted members are put
// together past the end of the output first, when its spare capacity has
// room for them (a caller that gives it as much room again as the input
// saves an allocation: nethttp does), else in a scratch buffer.
func (p *recParser) sortMembers(ms []recMember) error {
	from, end := ms[0].start, ms[len(ms)-1].end // the members, in the output
	moved := recSortByKey(ms)
	for k := 1; k < len(ms); k++ {
		if bytes.Equal(ms[k-1].key, ms[k].key) {
			return fmt.Errorf("%w: %q", ErrDuplicateKey, ms[k].key)
		}
	}
	if !moved {
		return nil
	}
	p.flush(p.pos)
	out := p.out
	inOut := cap(out)-len(out) >= end-from
	sorted := out[len(out):]
	if !inOut {
		if p.scratch == nil { // one buffer for most documents' objects
			p.scratch = make([]byte, 0, len(p.text))
		}
		sorted = p.scratch[:0]
	}
	for k, m := range ms {
		if k > 0 {
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, out[m.start:m.end]...)
	}
	copy(out[from:end], sorted)
	if !inOut {
		p.scratch = sorted // grown or not, for the next object
	}
	return nil
}

// recSortByKey sorts members by key and reports whether any moved. Most
// objects are small, and many already sorted: an insertion sort does the
// fewest comparisons on them (n-1 when sorted), with no call to compare.
func recSortByKey(ms []recMember) (moved bool) {
	if len(ms) > 12 { // (where slices.SortFunc sorts by insertion too)
		byKey := func(a, b recMember) int { return bytes.Compare(a.key, b.key) }
		if slices.IsSortedFunc(ms, byKey) {
			return false
		}
		slices.SortFunc(ms, byKey)
		return true
	}
	for k := 1; k < len(ms); k++ {
		m, j := ms[k], k
		for ; j > 0 && recCompareKeys(ms[j-1].key, m.key) > 0; j-- {
			ms[j] = ms[j-1]
		}
		if j < k {
			ms[j], moved = m, true
		}
	}
	return moved
}

// recCompareKeys is bytes.Compare, without its call for keys that differ in
// their first byte, as most do.
func recCompareKeys(a, b []byte) int {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] {
		return int(a[0]) - int(b[0])
	}
	return bytes.Compare(a, b)
}
