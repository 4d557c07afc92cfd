package canonjson

// Append is hand-tuned: it canonicalizes every HTTP request body the
// middleware fingerprints, and issue 35 bounds the middleware's instructions
// per request. Instructions per Append (callgrind), the recursive descent
// parser it replaced (recursive_test.go) → this one: 42.3 k → 34.7 k on the
// 1 KB payment body of the benchmarks (benchbody.Payment1K), 30.3 k → 24.3 k
// on the gate's (bench/testdata/payment-event.json). The cost was
// bookkeeping more than the byte scan: hence one loop over explicit states
// and an explicit stack instead of methods calling each other, members
// without pointers (no write barrier), keys compared by their first 8 bytes
// first, and leaf objects copied from the input in order at once.

import (
	"bytes"
	"encoding/binary"
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
	out, err := canonicalize(dst, data)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// member is an object member read: where its key is, and where it lands in
// the output, as `"key":value`. Its key is s[keyStart:keyEnd], or, if it held
// escapes, unescaped[^keyStart:keyEnd] (keyStart negative). It holds no
// pointer, so that writing one is a few stores (no write barrier).
type member struct {
	prefix           uint64 // the key's first 8 bytes, big-endian, padded with zeros: keys whose prefixes differ are in that order
	keyStart, keyEnd int
	start, end       int
}

// newMember returns the member whose key is key, at keyStart and keyEnd
// (see member), that starts at start in the output.
func newMember(key []byte, keyStart, keyEnd, start int) member {
	var prefix uint64
	if cap(key) >= 8 && len(key) > 0 { // 8 bytes from the key's start, the bytes past it masked off
		prefix = binary.BigEndian.Uint64(key[:8]) &^ (1<<(8*max(8-len(key), 0)) - 1)
	} else {
		var b [8]byte
		copy(b[:], key)
		prefix = binary.BigEndian.Uint64(b[:])
	}
	return member{prefix: prefix, keyStart: keyStart, keyEnd: keyEnd, start: start}
}

// key returns m's decoded key.
func (m *member) key(s, unescaped []byte) []byte {
	if m.keyStart >= 0 {
		return s[m.keyStart:m.keyEnd]
	}
	return unescaped[^m.keyStart:m.keyEnd]
}

// compare compares a's key with b's, as bytes.Compare does.
func compare(a, b *member, s, unescaped []byte) int {
	switch {
	case a.prefix < b.prefix:
		return -1
	case a.prefix > b.prefix:
		return 1
	}
	return bytes.Compare(a.key(s, unescaped), b.key(s, unescaped))
}

// frame is an open array or object.
type frame struct {
	first int // for an object, the index in members of its first member; array for an array
	open  int // where its '{' or '[' is in the input
}

// array is frame.first for an array.
const array = -1

// scanner is what canonicalize keeps in memory, not in registers: all but
// the text and the position in it. (In local variables, they made the
// compiler spill and reload registers around the loop, even on every byte
// of a string.) Its address is given to no function that is not inlined:
// the stack and members arrays it points to stay on the stack.
type scanner struct {
	stack     []frame  // the open arrays and objects, innermost last
	members   []member // the members read of the open objects, innermost last
	unescaped []byte   // the keys that held escapes, decoded, one after another
	scratch   []byte   // an object's members while they are reordered, when out has no room for them
}

// skipSpaces skips the white space at s[i:], which the output leaves out,
// writing the text before it to out, and returns out, run and i past it.
// canonicalize calls it when s[i] <= ' ': a compact document has none, and
// that test is all it costs there. (It and the other functions that are
// not inlined are given no pointer to the scanner: they return what
// changes. Stored through a pointer, a slice would escape to the heap.)
//
//go:noinline
func skipSpaces(out, s []byte, run, i int) ([]byte, int, int) {
	j := space(s, i)
	if j == i {
		return out, run, i
	}
	return append(out, s[run:i]...), j, j
}

// stringEnd reads the string whose opening quote is at s[i], which it
// writes to out as AppendQuoted writes its content (as it is, unless it
// holds an escape or a character AppendQuoted escapes), and returns its
// end, and out and run. If the string held escapes, its content, decoded,
// is appended to unescaped.
func stringEnd(out, s []byte, run, i int, unescaped []byte) (end int, _ []byte, _ int, _ []byte, err error) {
	j := plain(s, i+1)
	if j < len(s) && s[j] == '"' { // as it is, as most are
		return j + 1, out, run, unescaped, nil
	}
	n := len(unescaped)
	end, unescaped, escaped, rewrite, err := stringTail(s, i, j, unescaped)
	if err != nil {
		return 0, out, run, unescaped, err
	}
	if rewrite {
		content := s[i+1 : end-1]
		if escaped {
			content = unescaped[n:]
		}
		out = appendQuoted(append(out, s[run:i]...), content)
		run = end
	}
	return end, out, run, unescaped, nil
}

// canonicalize appends the canonical form of s, valid UTF-8, to out.
//
// Most of a document's canonical form is its text as it is: s[run:i] is
// canonical and not yet in out, and is written in one copy when something
// differs (white space left out, a string re-escaped) or at the end. An
// object's members are reordered when it closes: copied from the input in
// their order if its text is canonical as it is, else reordered in the
// output, whose length does not change, so that the offsets of the members
// of the objects around it stay right.
//
// It is one loop over three states, the labels value, after and key. It
// returns the errors of the recursive descent parser it replaced
// (recursive_test.go), which returns those of the first implementation
// (reference_test.go, a walk of encoding/json's Decoder.Token), as callers
// tell ErrTooDeep and ErrDuplicateKey apart from ErrInvalid: it finds
// errors left to right as it reads tokens, which comes down to three rules
// beyond the syntax:
//   - an array's elements are too deep once the array has one (the next
//     byte is not ']', '}' or the end, as Decoder.More says), before that
//     element is read;
//   - an object member's value is too deep once its key is read, before
//     the ':' is;
//   - a duplicate key is found when its object closes, after all of its
//     members were read (the reference sorts them then), and the least key
//     that appears twice is named.
func canonicalize(out, s []byte) ([]byte, error) {
	var (
		stackRoom  [16]frame // most documents' stack and members, without an allocation
		memberRoom [32]member
	)
	sc := scanner{stack: stackRoom[:0], members: memberRoom[:0]}
	run := 0 // s[run:i] is canonical as it is, and not yet in out
	i := 0
	var err error

value: // A value starts at i, maybe after white space.
	if i < len(s) && s[i] <= ' ' {
		out, run, i = skipSpaces(out, s, run, i)
	}
	if i == len(s) {
		return nil, invalid(s, i, "expected a value")
	}
	switch c := s[i]; {
	case c == '"':
		if j := plain(s, i+1); j < len(s) && s[j] == '"' {
			i = j + 1 // as it is, as most are
			break
		}
		n := len(sc.unescaped)
		if i, out, run, sc.unescaped, err = stringEnd(out, s, run, i, sc.unescaped); err != nil {
			return nil, err
		}
		sc.unescaped = sc.unescaped[:n] // a value's content is not kept
	case c == '{':
		open := i
		if i++; i < len(s) && s[i] <= ' ' {
			out, run, i = skipSpaces(out, s, run, i)
		}
		if i < len(s) && s[i] == '}' {
			i++
			break
		}
		sc.stack = append(sc.stack, frame{first: len(sc.members), open: open})
		goto key
	case c == '[':
		open := i
		if i++; i < len(s) && s[i] <= ' ' {
			out, run, i = skipSpaces(out, s, run, i)
		}
		if i < len(s) && s[i] == ']' {
			i++
			break
		}
		if i == len(s) || s[i] == '}' {
			return nil, invalid(s, i, "in array")
		}
		if len(sc.stack)+1 > MaxDepth {
			return nil, ErrTooDeep
		}
		sc.stack = append(sc.stack, frame{first: array, open: open})
		goto value
	case '0' <= c && c <= '9' || c == '-':
		if i, err = number(s, i); err != nil {
			return nil, err
		}
	case c == 't':
		if len(s)-i < len("true") || string(s[i:i+4]) != "true" {
			return nil, invalid(s, i, "in literal true")
		}
		i += len("true")
	case c == 'f':
		if len(s)-i < len("false") || string(s[i:i+5]) != "false" {
			return nil, invalid(s, i, "in literal false")
		}
		i += len("false")
	case c == 'n':
		if len(s)-i < len("null") || string(s[i:i+4]) != "null" {
			return nil, invalid(s, i, "in literal null")
		}
		i += len("null")
	default:
		return nil, invalid(s, i, "expected a value")
	}

after: // A value ended at i: what follows depends on what holds it.
	if i < len(s) && s[i] <= ' ' {
		out, run, i = skipSpaces(out, s, run, i)
	}
	if len(sc.stack) == 0 {
		if i < len(s) {
			return nil, invalid(s, i, "trailing data")
		}
		out, run = append(out, s[run:i]...), i
		return out, nil
	}
	if top := sc.stack[len(sc.stack)-1]; top.first == array {
		switch {
		case i < len(s) && s[i] == ',':
			i++
			goto value
		case i < len(s) && s[i] == ']':
			i++
			sc.stack = sc.stack[:len(sc.stack)-1]
			goto after
		}
		return nil, invalid(s, i, "in array")
	} else {
		sc.members[len(sc.members)-1].end = len(out) + i - run
		if i < len(s) && s[i] == '}' {
			i++
			ms := sc.members[top.first:]
			sc.members, sc.stack = sc.members[:top.first], sc.stack[:len(sc.stack)-1]
			if len(ms) > 1 {
				from, end := ms[0].start, ms[len(ms)-1].end // the members, in the output
				moved, dup := sortByKey(ms, s, sc.unescaped)
				switch {
				case dup:
					return nil, duplicate(ms, s, sc.unescaped)
				case moved && run <= top.open:
					// Its text is canonical as it is, and none of it is in
					// the output yet: copied from the input, in order.
					out = copySorted(out, s, run, from, ms)
					run = i
				case moved:
					out, run = append(out, s[run:i]...), i
					sc.scratch = reorder(out, from, end, ms, sc.scratch, len(s))
				}
			}
			goto after
		}
		if i == len(s) || s[i] != ',' {
			return nil, invalid(s, i, "in object")
		}
		if i++; i < len(s) && s[i] <= ' ' {
			out, run, i = skipSpaces(out, s, run, i)
		}
	}

key: // An object member starts at i (white space skipped).
	if i == len(s) || s[i] != '"' {
		return nil, invalid(s, i, "expected object key")
	}
	if j := plain(s, i+1); j < len(s) && s[j] == '"' { // as it is, as most are
		sc.members = append(sc.members, newMember(s[i+1:j], i+1, j, len(out)+i-run))
		i = j + 1
	} else {
		start, quote, n := len(out)+i-run, i, len(sc.unescaped)
		if i, out, run, sc.unescaped, err = stringEnd(out, s, run, i, sc.unescaped); err != nil {
			return nil, err
		}
		m := newMember(s[quote+1:i-1], quote+1, i-1, start)
		if len(sc.unescaped) > n { // it held escapes: its content is there
			m = newMember(sc.unescaped[n:], ^n, len(sc.unescaped), start)
		}
		sc.members = append(sc.members, m)
	}
	if len(sc.stack) > MaxDepth {
		return nil, ErrTooDeep
	}
	if i < len(s) && s[i] <= ' ' {
		out, run, i = skipSpaces(out, s, run, i)
	}
	if i == len(s) || s[i] != ':' {
		return nil, invalid(s, i, "expected :")
	}
	i++
	goto value
}

// invalid returns ErrInvalid, saying what was wrong at s[i].
//
//go:noinline
func invalid(s []byte, i int, what string) error {
	if i >= len(s) {
		return fmt.Errorf("%w: %s: unexpected end of input", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s: unexpected %q at offset %d", ErrInvalid, what, s[i], i)
}

// space returns the end of JSON's white space (space, tab, CR and LF) at
// s[i:].
func space(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// plain returns the end of the bytes at s[i:] that a string holds as they
// are in its canonical form (asIs).
func plain(s []byte, i int) int {
	t := s[i:]
	for ; len(t) >= 4; t = t[4:] { // unrolled: one length check for 4 bytes
		switch {
		case !asIs[t[0]]:
			return len(s) - len(t)
		case !asIs[t[1]]:
			return len(s) - len(t) + 1
		case !asIs[t[2]]:
			return len(s) - len(t) + 2
		case !asIs[t[3]]:
			return len(s) - len(t) + 3
		}
	}
	for k, c := range t {
		if !asIs[c] {
			return len(s) - len(t) + k
		}
	}
	return len(s)
}

// number reads the number at s[i], -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?,
// which the output keeps as written, and returns its end. What follows it
// is the caller's to check, as in encoding/json's scanner (01 is the number
// 0, then an unexpected 1).
func number(s []byte, i int) (int, error) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = digits(s, i+1)
	default:
		return 0, invalid(s, i, "in number")
	}
	if i < len(s) && s[i] == '.' {
		if i++; digits(s, i) == i {
			return 0, invalid(s, i, "after decimal point in number")
		}
		i = digits(s, i)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		if i++; i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits(s, i) == i {
			return 0, invalid(s, i, "in exponent of number")
		}
		i = digits(s, i)
	}
	return i, nil
}

// digits returns the end of the decimal digits at s[i:].
func digits(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// stringTail reads the string whose opening quote is at s[start] from s[i],
// where its plain bytes end, and returns its end. Its syntax is JSON's: no
// control characters, and only the escapes \" \\ \/ \b \f \n \r \t and
// \uXXXX. If it held escapes (escaped), its decoded content is appended to
// unescaped, which it returns. rewrite says whether its canonical form
// (AppendQuoted's of its content) differs from its text, as it does if it
// holds an escape or a character AppendQuoted escapes.
func stringTail(s []byte, start, i int, unescaped []byte) (end int, _ []byte, escaped, rewrite bool, err error) {
	for ; ; i++ {
		i = plain(s, i)
		if i == len(s) {
			return 0, unescaped, false, false, invalid(s, i, "in string")
		}
		switch c := s[i]; {
		case c == '"':
			if escaped {
				unescaped = unescape(unescaped, s[start+1:i])
			}
			return i + 1, unescaped, escaped, rewrite, nil
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
				return 0, unescaped, false, false, invalid(s, i, "in string escape")
			}
		case c < ' ':
			return 0, unescaped, false, false, invalid(s, i, "in string (a control character)")
		case c >= utf8.RuneSelf:
			// Valid UTF-8 (Append checked), written as it is but for
			// U+2028 and U+2029 (E2 80 A8 and E2 80 A9), which AppendQuoted
			// escapes. The continuation bytes come back here, as bytes
			// that are not E2.
			if c == 0xE2 && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8 {
				rewrite = true
			}
		default: // < > &, which AppendQuoted escapes
			rewrite = true
		}
	}
}

// unescapes maps the byte after a backslash to the byte it stands for, and
// every byte that cannot follow one to 0 (u, the start of \uXXXX, too).
var unescapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape appends the decoded content of a string whose syntax stringTail
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

// sortByKey sorts an object's members by key, and reports whether any
// moved and whether two keys are equal. Most objects are small, and many
// already sorted: an insertion sort does the fewest comparisons on them
// (n-1 when sorted), and it compares every key with an equal one, if any,
// on the way (it stops at the first key not greater, to the left of which
// all are less).
func sortByKey(ms []member, s, unescaped []byte) (moved, dup bool) {
	if len(ms) > 12 { // (where slices.SortFunc sorts by insertion too)
		return sortLarge(ms, s, unescaped)
	}
	for k := 1; k < len(ms); k++ {
		m := ms[k]
		c := compare(&ms[k-1], &m, s, unescaped)
		if c <= 0 {
			dup = dup || c == 0
			continue
		}
		j := k - 1
		for ms[j+1] = ms[j]; j > 0; j-- {
			c := compare(&ms[j-1], &m, s, unescaped)
			if c <= 0 {
				dup = dup || c == 0
				break
			}
			ms[j] = ms[j-1]
		}
		ms[j], moved = m, true
	}
	return moved, dup
}

// sortLarge is sortByKey for objects past the insertion sort's size.
//
//go:noinline
func sortLarge(ms []member, s, unescaped []byte) (moved, dup bool) {
	byKey := func(a, b member) int { return compare(&a, &b, s, unescaped) }
	if !slices.IsSortedFunc(ms, byKey) {
		slices.SortFunc(ms, byKey)
		moved = true
	}
	for k := 1; k < len(ms); k++ {
		if byKey(ms[k-1], ms[k]) == 0 {
			return moved, true
		}
	}
	return moved, false
}

// duplicate returns ErrDuplicateKey, naming the least key of the sorted
// members that appears twice.
//
//go:noinline
func duplicate(ms []member, s, unescaped []byte) error {
	for k := 1; k < len(ms); k++ {
		if key := ms[k].key(s, unescaped); bytes.Equal(ms[k-1].key(s, unescaped), key) {
			return fmt.Errorf("%w: %q", ErrDuplicateKey, string(key)) // a copy: key does not escape
		}
	}
	return ErrDuplicateKey // not reached: sortByKey found two keys equal
}

// copySorted appends the object at s[run:], which closes with its last
// member, to out, its sorted members ms (at from, in the output) in order:
// its text is canonical as it is, and none of it is in out.
func copySorted(out, s []byte, run, from int, ms []member) []byte {
	shift := run - len(out) // where a byte of the output would be in the input
	out = append(out, s[run:from+shift]...)
	for k := range ms {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, s[ms[k].start+shift:ms[k].end+shift]...)
	}
	return append(out, '}')
}

// reorder rewrites the members of the object that out ends with, at
// out[from:end], in their sorted order ms. They are put together past the
// end of out first, when its spare capacity has room for them (a caller
// that gives it as much room again as the input saves an allocation:
// nethttp does), else in scratch, which it returns (grown, or made with
// room for size bytes, for most documents' objects).
func reorder(out []byte, from, end int, ms []member, scratch []byte, size int) []byte {
	sorted := out[len(out):]
	inOut := cap(out)-len(out) >= end-from
	if !inOut {
		if scratch == nil {
			scratch = make([]byte, 0, size)
		}
		sorted = scratch[:0]
	}
	for k := range ms {
		if k > 0 {
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, out[ms[k].start:ms[k].end]...)
	}
	copy(out[from:end], sorted)
	if !inOut {
		return sorted // grown or not, for the next object
	}
	return scratch
}
