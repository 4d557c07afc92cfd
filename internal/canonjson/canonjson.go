package canonjson

import (
	"bytes"
	"encoding/binary"
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
	out, err := p.parse(dst, data)
	p.release()
	if err != nil {
		return dst, err
	}
	return out, nil
}

// parsers reuse the scratch buffers of a parse: the stacks of containers,
// members and keys, and the buffers objects are reordered through.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// maxPooled bounds the scratch kept for reuse (bytes): one huge document must
// not pin its buffers in the pool.
const maxPooled = 64 << 10

// parser holds the scratch of a pass over a document. The pass (parse) checks
// the syntax as it appends the canonical form to the output, left to right,
// and sorts each object's members in place once the object is closed. Errors
// are found in the order the first implementation found them (it walked
// encoding/json's Decoder.Token), which matters because callers tell
// ErrTooDeep and ErrDuplicateKey apart from ErrInvalid: a depth check comes
// before the separator (',' or ':') of the value it guards, and duplicates
// are found when their object closes.
//
// The position and the output are local variables of parse rather than
// fields: they stay in registers or on the stack, and storing a slice in the
// parser, which lives on the heap, would cost a GC write barrier each time.
// The stacks of frames and members are the other way round: parse keeps
// only how many are in use, so that it holds fewer values than there are
// registers (else the compiler moves them between registers and the stack
// at every jump between its states); frames and members are kept as long
// as their capacity.
type parser struct {
	frames  []int        // the arrays and objects open around the innermost one
	members []member     // the members of every object open, innermost last
	keys    []byte       // decoded keys that held escapes
	order   []sortEntry  // a closed object's members in key order
	runs    []membersRun // the same, as runs of members to copy at once
	shape   []uint64     // the prefixes of the object runs is for, if distinct
	scratch []byte       // a string's decoded content; an object's members while reordered
}

// The frames of parse, the arrays and objects open, are each an int: for an
// object, where its members start in parser.members; inArray for an array;
// inDocument around the document's value.
const (
	inArray    = -1
	inDocument = -2
)

// member is one object member, written to the output as `"key":value`
// from offset start up to the comma before the next member (or the end of
// the object), with its decoded key, what members are sorted and compared
// by: data[keyOff:keyEnd], or keys[keyOff:keyEnd] if it held escapes. prefix
// holds the key's first 8 bytes, big-endian and zero-padded: keys mostly
// differ there, so most comparisons are of two integers.
type member struct {
	prefix         uint64
	keyOff, keyEnd int
	start          int
	escaped        bool
}

// sortEntry is a member (members[base+i]) in the order being sorted: moving
// 16 bytes rather than a whole member, its prefix at hand.
type sortEntry struct {
	prefix uint64
	i      int
}

func (p *parser) release() {
	p.order, p.runs, p.shape = p.order[:0], p.runs[:0], p.shape[:0]
	p.keys, p.scratch = p.keys[:0], p.scratch[:0]
	if cap(p.frames)*8 > maxPooled || cap(p.members)*40 > maxPooled || cap(p.order)*16 > maxPooled ||
		cap(p.runs)*16 > maxPooled || cap(p.shape)*8 > maxPooled || cap(p.keys) > maxPooled || cap(p.scratch) > maxPooled {
		return // let it go rather than keep it
	}
	parsers.Put(p)
}

func (p *parser) key(data []byte, m *member) []byte {
	if m.escaped {
		return p.keys[m.keyOff:m.keyEnd]
	}
	return data[m.keyOff:m.keyEnd]
}

// invalid returns ErrInvalid, saying what was wrong where.
func invalid(data []byte, pos int, what string) error {
	if pos >= len(data) {
		return fmt.Errorf("%w: %s: unexpected end of input", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s: unexpected %q at offset %d", ErrInvalid, what, data[pos], pos)
}

// parse appends the canonical form of data, one JSON value, to out. It is a
// loop over the states below, the open arrays and objects on a stack
// (top, the innermost, and the others in p.frames) rather than in recursive
// calls: a value starts, a value ended, an object key starts, an object
// member's value ended.
//
// Most of a compact document is written as it is (punctuation, numbers,
// literals, strings with nothing to escape): rather than append each token,
// parse leaves data[run:pos] to stand for output not appended yet, and
// appends it in one copy where something else must be written (white space
// left out, a string re-escaped, an object reordered) and at the end. So
// the length of the output so far is len(out)+pos-run, which is what member
// offsets count.
func (p *parser) parse(out, data []byte) ([]byte, error) {
	var (
		pos, run int
		top      = inDocument // the innermost frame
		depth    int          // the frames around it, in p.frames[:depth]
		nm       int          // the members of the objects open, in p.members[:nm]
	)

value: // A value, or white space before it, starts at pos.
	if pos < len(data) && data[pos] <= ' ' {
		out, run, pos = skipSpace(out, data, run, pos)
	}
	if pos >= len(data) {
		return nil, invalid(data, pos, "expected a value")
	}
	switch data[pos] {
	case '{':
		depth, top = p.push(depth, top), nm
		pos++
		if pos < len(data) && data[pos] <= ' ' {
			out, run, pos = skipSpace(out, data, run, pos)
		}
		if pos < len(data) {
			switch data[pos] {
			case '"':
				goto key
			case '}':
				pos++
				depth--
				top = p.frames[depth]
				goto next
			}
		}
		return nil, invalid(data, pos, "expected object key")
	case '[':
		depth, top = p.push(depth, top), inArray
		pos++
		if pos < len(data) && data[pos] <= ' ' {
			out, run, pos = skipSpace(out, data, run, pos)
		}
		if pos >= len(data) || data[pos] == '}' {
			return nil, invalid(data, pos, "in array")
		}
		if data[pos] == ']' {
			pos++
			depth--
			top = p.frames[depth]
			goto next
		}
		if depth > MaxDepth { // the first element's depth
			return nil, ErrTooDeep
		}
		goto value
	case '"':
		// Most strings are written as they are.
		if i := plainEnd(data, pos+1); i < len(data) && data[i] == '"' {
			pos = i + 1
			goto next
		}
		end, kind, err := scanString(data, pos)
		if err != nil {
			return nil, err
		}
		if kind != strVerbatim {
			s := data[pos+1 : end-1]
			if kind == strEscaped {
				p.scratch = unescape(p.scratch[:0], s)
				s = p.scratch
			}
			out = appendQuoted(append(out, data[run:pos]...), s)
			run = end
		}
		pos = end
	case 't':
		if len(data)-pos < 4 || string(data[pos:pos+4]) != "true" {
			return nil, invalid(data, pos, "in literal true")
		}
		pos += 4
	case 'f':
		if len(data)-pos < 5 || string(data[pos:pos+5]) != "false" {
			return nil, invalid(data, pos, "in literal false")
		}
		pos += 5
	case 'n':
		if len(data)-pos < 4 || string(data[pos:pos+4]) != "null" {
			return nil, invalid(data, pos, "in literal null")
		}
		pos += 4
	default:
		c := data[pos]
		if c != '-' && c-'0' >= 10 {
			return nil, invalid(data, pos, "expected a value")
		}
		// Most numbers are integers, scanned here.
		if c != '0' && c != '-' {
			if i := digits(data, pos+1); i >= len(data) || data[i] != '.' && data[i]|0x20 != 'e' {
				pos = i
				goto next
			}
		}
		var err error
		if pos, err = number(data, pos); err != nil {
			return nil, err
		}
	}

next: // A value ended at pos: what may follow depends on what holds it.
	if top == inDocument {
		goto done
	}
	if pos < len(data) && data[pos] <= ' ' {
		out, run, pos = skipSpace(out, data, run, pos)
	}
	if top == inArray {
		if pos < len(data) {
			switch data[pos] {
			case ',':
				pos++
				goto value
			case ']':
				pos++
				depth--
				top = p.frames[depth]
				goto next
			}
		}
		return nil, invalid(data, pos, "in array")
	}
	if pos < len(data) {
		switch data[pos] {
		case ',':
			pos++
			if pos < len(data) && data[pos] <= ' ' {
				out, run, pos = skipSpace(out, data, run, pos)
			}
			if pos < len(data) && data[pos] == '"' {
				goto key
			}
			return nil, invalid(data, pos, "expected object key")
		case '}':
			// Most objects are sorted already, and their keys differ in
			// their first 8 bytes: then there is nothing to do.
			ms := p.members[top:nm]
			for k := 1; k < len(ms); k++ {
				if ms[k-1].prefix >= ms[k].prefix {
					var err error
					if out, run, err = p.closeObject(out, data, run, pos, ms); err != nil {
						return nil, err
					}
					break
				}
			}
			nm = top
			depth--
			top = p.frames[depth]
			pos++
			goto next
		}
	}
	return nil, invalid(data, pos, "in object")

key: // An object key's opening quote is at pos.
	// The member is filled in where it is: built aside, it would be copied
	// by 16-byte loads of 8-byte stores, which stalls (no store forwarding).
	if nm == len(p.members) {
		p.grow()
	}
	nm++
	if m, i := &p.members[nm-1], plainEnd(data, pos+1); i < len(data) && data[i] == '"' {
		// Most keys are written as they are: the member is in data.
		if pos+9 <= len(data) { // prefix, without the call's checks
			m.prefix = binary.BigEndian.Uint64(data[pos+1 : pos+9])
			if n := i - pos - 1; n < 8 {
				m.prefix &^= ^uint64(0) >> (8 * n)
			}
		} else {
			m.prefix = prefix(data[pos+1:], i-pos-1)
		}
		m.keyOff, m.keyEnd, m.escaped = pos+1, i, false
		m.start = len(out) + pos - run
		pos = i + 1
	} else {
		m.start, m.keyOff, m.escaped = len(out)+pos-run, pos+1, false
		end, kind, err := scanString(data, pos)
		if err != nil {
			return nil, err
		}
		m.keyEnd = end - 1
		k := data[m.keyOff:m.keyEnd]
		if kind == strEscaped {
			m.keyOff, m.escaped = len(p.keys), true
			p.keys = unescape(p.keys, k)
			m.keyEnd = len(p.keys)
			k = p.keys[m.keyOff:]
		}
		if kind != strVerbatim {
			out = appendQuoted(append(out, data[run:pos]...), k)
			run = end
		}
		m.prefix = prefix(k, len(k))
		pos = end
	}
	if depth > MaxDepth { // the member's value's depth
		return nil, ErrTooDeep
	}
	if pos < len(data) && data[pos] <= ' ' {
		out, run, pos = skipSpace(out, data, run, pos)
	}
	if pos >= len(data) || data[pos] != ':' {
		return nil, invalid(data, pos, "expected :")
	}
	pos++
	// Most values after a key are strings written as they are or integers,
	// with no white space before them: taken here, they save the checks of
	// value and next, and the moves of registers at each jump.
	if pos < len(data) {
		if c := data[pos]; c == '"' {
			if i := plainEnd(data, pos+1); i < len(data) && data[i] == '"' {
				pos = i + 1
				goto member
			}
		} else if c-'1' < 9 {
			if i := digits(data, pos+1); i >= len(data) || data[i] != '.' && data[i]|0x20 != 'e' {
				pos = i
				goto member
			}
		}
	}
	goto value

member: // An object member's value ended at pos: most often another follows.
	if pos+1 < len(data) && data[pos] == ',' && data[pos+1] == '"' {
		pos++
		goto key
	}
	goto next

done: // The document's value ended at pos.
	out = append(out, data[run:pos]...)
	for pos < len(data) && isSpace(data[pos]) {
		pos++
	}
	if pos < len(data) {
		return nil, invalid(data, pos, "trailing data")
	}
	return out, nil
}

// push saves top, the frame that a new array or object opens inside, at
// depth, and returns the depth inside the new one.
func (p *parser) push(depth, top int) int {
	if depth == len(p.frames) {
		p.grow()
	}
	p.frames[depth] = top
	return depth + 1
}

// grow makes room for another frame and member, or either: parse checks
// that there is room for each, and calls grow rarely.
func (p *parser) grow() {
	if len(p.frames) == cap(p.frames) {
		p.frames = append(p.frames, make([]int, max(16, len(p.frames)))...)
	}
	if len(p.members) == cap(p.members) {
		p.members = append(p.members, make([]member, max(16, len(p.members)))...)
	}
	p.frames, p.members = p.frames[:cap(p.frames)], p.members[:cap(p.members)]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace skips the white space at pos: output stops before it (out gets
// data[run:pos]) and resumes after it. It returns out, run and pos as they
// become.
func skipSpace(out, data []byte, run, pos int) ([]byte, int, int) {
	out = append(out, data[run:pos]...)
	for pos < len(data) && isSpace(data[pos]) {
		pos++
	}
	return out, pos, pos
}

// prefix returns the first 8 bytes of b[:n], the n bytes of a key,
// big-endian, zero-padded. The bytes of b past n, if any, are ignored.
func prefix(b []byte, n int) uint64 {
	if len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		if n < 8 {
			v &^= ^uint64(0) >> (8 * n)
		}
		return v
	}
	var v uint64
	for i := range n {
		v |= uint64(b[i]) << (56 - 8*i)
	}
	return v
}

// number returns the end of the number at pos, after checking its syntax:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What follows it is the
// caller's to check, as in encoding/json's scanner.
func number(data []byte, pos int) (int, error) {
	i := pos
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case digits(data, i) == i:
		return 0, invalid(data, i, "in number")
	default:
		i = digits(data, i)
	}
	if i < len(data) && data[i] == '.' {
		i++
		if j := digits(data, i); j > i {
			i = j
		} else {
			return 0, invalid(data, i, "after decimal point in number")
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if j := digits(data, i); j > i {
			i = j
		} else {
			return 0, invalid(data, i, "in exponent of number")
		}
	}
	return i, nil
}

// digits returns the end of the decimal digits at i.
func digits(data []byte, i int) int {
	for i < len(data) && data[i]-'0' < 10 {
		i++
	}
	return i
}

// closeObject checks the members of the object whose '}' is at pos for a key
// that appears twice, and writes them sorted by key where they are in the
// output. The output's length does not change, so the offsets held by the
// objects around stay right. It returns out and run as they become. parse
// calls it only for an object not sorted already, or with two keys that
// share their prefix.
func (p *parser) closeObject(out, data []byte, run, pos int, ms []member) ([]byte, int, error) {
	if !p.sameShape(ms) {
		sorted, err := p.sortMembers(data, ms)
		if sorted || err != nil {
			return out, run, err
		}
	}
	first, last := ms[0].start, len(out)+pos-run // where the members are in the output
	if first >= len(out) {
		// The members are still in data as written: append them from there
		// in order, after what comes before them.
		at := run - len(out) // output offset to data offset
		out = append(out, data[run:first+at]...)
		return appendRuns(out, data, -at, ms, p.runs, last), pos, nil
	}
	// Else they are in out, up to its end: copy them aside and write them
	// back in order.
	out = append(out, data[run:pos]...)
	p.scratch = append(p.scratch[:0], out[first:]...)
	return appendRuns(out[:first], p.scratch, first, ms, p.runs, last), pos, nil
}

// sameShape reports whether ms's keys have the prefixes, in the same
// order, of the last object sortMembers ordered whose prefixes were all
// different: then ms sorts the same, as p.runs says, and has no key twice.
// The objects of an array mostly have the same keys in the same order, and
// need not be sorted each.
func (p *parser) sameShape(ms []member) bool {
	if len(ms) != len(p.shape) {
		return false
	}
	for i, pre := range p.shape {
		if ms[i].prefix != pre {
			return false
		}
	}
	return true
}

// membersRun is members i to j of an object, next to each other in the
// input and in key order.
type membersRun struct{ i, j int }

// sortMembers sorts ms by key, into p.runs, and reports whether they were
// sorted already; a key that appears twice is an error (the least such).
func (p *parser) sortMembers(data []byte, ms []member) (bool, error) {
	n := len(ms)
	// Objects are mostly small: an insertion sort, which also tells whether
	// the members were sorted already, and finds duplicates (as the
	// neighbour an entry stops at).
	if cap(p.order) < n {
		p.order = make([]sortEntry, max(n, 16))
	}
	order := p.order[:n]
	sorted := true
	var dup []byte // the least key that appears twice
	if n <= 16 {
		order[0] = sortEntry{ms[0].prefix, 0}
		for i := 1; i < n; i++ {
			e, j := sortEntry{ms[i].prefix, i}, i
			for ; j > 0; j-- {
				f := order[j-1]
				if e.prefix > f.prefix {
					break
				}
				if e.prefix == f.prefix { // rare: compare the whole keys
					c := p.compare(data, e, f, ms)
					if c == 0 {
						if k := p.key(data, &ms[i]); dup == nil || bytes.Compare(k, dup) < 0 {
							dup = k
						}
					}
					if c >= 0 {
						break
					}
				}
				order[j] = f
				sorted = false
			}
			order[j] = e
		}
	} else {
		for i := range order {
			order[i] = sortEntry{ms[i].prefix, i}
		}
		slices.SortFunc(order, func(a, b sortEntry) int { return p.compare(data, a, b, ms) })
		for i := 1; i < n; i++ {
			if order[i].i < order[i-1].i {
				sorted = false
			}
			if dup == nil && order[i-1].prefix == order[i].prefix {
				if k := p.key(data, &ms[order[i].i]); bytes.Equal(p.key(data, &ms[order[i-1].i]), k) {
					dup = k
				}
			}
		}
	}
	if dup != nil {
		return false, fmt.Errorf("%w: %q", ErrDuplicateKey, dup)
	}
	p.shape = p.shape[:0]
	if sorted {
		return true, nil
	}
	p.runs = p.runs[:0]
	distinct := true
	for k := 0; k < n; {
		i := order[k].i
		j := i // ms[i:j+1] are next in order too
		for k++; k < n && order[k].i == j+1; k++ {
			j++
		}
		p.runs = append(p.runs, membersRun{i, j})
		if k < n && order[k-1].prefix == order[k].prefix {
			distinct = false
		}
	}
	if distinct { // then the same prefixes in the same order sort the same
		for i := range ms {
			p.shape = append(p.shape, ms[i].prefix)
		}
	}
	return false, nil
}

// appendRuns appends the members of ms in the order of runs, separated by
// commas, from src, which holds the output from offset base on. last is the
// end of the last member.
func appendRuns(out, src []byte, base int, ms []member, runs []membersRun, last int) []byte {
	for k, r := range runs {
		end := last
		if r.j+1 < len(ms) {
			end = ms[r.j+1].start - 1
		}
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, src[ms[r.i].start-base:end-base]...)
	}
	return out
}

// compare orders two members of ms by their decoded keys' bytes.
func (p *parser) compare(data []byte, a, b sortEntry, ms []member) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	return bytes.Compare(p.key(data, &ms[a.i]), p.key(data, &ms[b.i]))
}

// plainEnd returns the end of the bytes from i on that a string can hold
// and that are written as they are (scanString looks further, past a 0xE2
// that does not start U+2028 or U+2029). Four bytes a loop take fewer
// instructions a byte than one. (Eight at a time, classified together by
// arithmetic on a word, took longer: most strings are short.)
func plainEnd(data []byte, i int) int {
	for ; i+4 <= len(data); i += 4 {
		b := data[i : i+4]
		if !verbatim[b[0]] {
			return i
		}
		if !verbatim[b[1]] {
			return i + 1
		}
		if !verbatim[b[2]] {
			return i + 2
		}
		if !verbatim[b[3]] {
			return i + 3
		}
	}
	for i < len(data) && verbatim[data[i]] {
		i++
	}
	return i
}

// What scanString finds a string holds.
const (
	strVerbatim  = iota // written as it is
	strUnescaped        // no escapes, but bytes appendQuoted escapes
	strEscaped          // escapes, to decode
)

// scanString returns the end of the string whose opening quote is at pos
// (past its closing quote) and what it holds, after checking its syntax,
// JSON's: no control characters, and only the escapes \" \\ \/ \b \f \n \r
// \t \uXXXX.
func scanString(data []byte, pos int) (end, kind int, err error) {
	i := pos + 1
	for {
		for i < len(data) && verbatim[data[i]] {
			i++
		}
		if i >= len(data) {
			return 0, 0, invalid(data, i, "in string")
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, kind, nil
		case c == '\\':
			kind = strEscaped
			i++
			if i >= len(data) {
				return 0, 0, invalid(data, i, "in string escape")
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				if hex4(data[i:]) < 0 {
					return 0, 0, invalid(data, i, `in \u escape`)
				}
				i += 4
			default:
				return 0, 0, invalid(data, i, "in string escape")
			}
		case c < 0x20:
			return 0, 0, invalid(data, i, "in string (a control character)")
		default:
			// < > & or 0xE2, which starts U+2028 and U+2029, escaped by
			// appendQuoted, and other characters (Append checked that the
			// input is valid UTF-8).
			if c != 0xE2 || data[i+1] == 0x80 && data[i+2]&^1 == 0xA8 {
				kind = max(kind, strUnescaped)
			}
			i++
		}
	}
}

// unescape appends the decoded content of a string whose syntax scanString
// checked to b, as encoding/json decodes it: a \u escape of a UTF-16 surrogate is
// joined with a following \u escape of its pair, and one that has no pair
// becomes U+FFFD alone (the escape after it is decoded by itself).
func unescape(b, s []byte) []byte {
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

// verbatim says which bytes a string can hold that appendQuoted writes as
// they are: the ASCII bytes it writes so, and bytes of multi-byte
// characters but 0xE2, which starts U+2028 and U+2029.
var verbatim = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < utf8.RuneSelf && asIs[c] || c >= utf8.RuneSelf && c != 0xE2
	}
	return t
}()
