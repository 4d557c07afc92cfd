package canonjson

// Append is hand-tuned: it canonicalizes every HTTP request body the
// middleware fingerprints, and issue 35 bounds the middleware's instructions
// per request. Instructions per Append (callgrind) on the 1 KB payment body
// of the benchmarks (benchbody.Payment1K), the recursive descent parser it
// replaced (recursive_test.go) → the loop below as first written: 42.3 k →
// 34.7 k. Per Canonicalize (BenchmarkCanonicalize/payment-1k), that loop
// then → now: 35.7 k → 23.8 k. The cost was bookkeeping more than the byte
// scan: hence one loop over explicit states and an explicit stack instead
// of methods calling each other, members without pointers (no write
// barrier), keys compared by their first 8 bytes first, and leaf objects
// copied from the input in order at once. Then, as a call makes the
// compiler save the loop's registers and reload them after, the common
// cases with no call: strings read 8 bytes at a time, their first 8 in the
// loop (plain, special), integers read in it, keys sorted by their prefixes
// alone (sortByPrefix), members copied 32 bytes at a time (copySorted); and
// the tests for what is seldom there made only where what is expected is
// not: white space (skipSpaces), invalid UTF-8 (Append). And no
// allocation to reorder an object that the output has no room for
// (reorder, 24.0 k → 23.8 k).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// le reads and writes words in the order of the bytes in memory: the lowest
// bits are the first byte.
var le = binary.LittleEndian

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 512

// Errors returned by Canonicalize.
var (
	ErrInvalid      = errors.New("canonjson: invalid JSON")
	ErrDuplicateKey = errors.New("canonjson: duplicate object key")
	ErrTooDeep      = errors.New("canonjson: nesting too deep")
)

// errNotUTF8 is the error for input that is not valid UTF-8.
var errNotUTF8 = fmt.Errorf("%w: not valid UTF-8", ErrInvalid)

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
	out, err := canonicalize(dst, data)
	if err != nil {
		// Invalid UTF-8 anywhere is ErrInvalid, before any other error, as
		// the first implementation checked it over the whole input first.
		// Checked here, on the error path only: canonicalize read every
		// byte past ASCII of a document it accepts, in a string, whose
		// characters it checks.
		if !utf8.Valid(data) {
			return dst, errNotUTF8
		}
		return dst, err
	}
	return out, nil
}

// member is an object member read: where its key is, and where it starts
// in the output, as `"key":value` (it ends where the ',' before the next
// one lands, or the object's '}'). Its key is s[keyStart:keyEnd], or, if it
// held escapes, unescaped[^keyStart:keyEnd] (keyStart negative). It holds
// no pointer, so that writing one is a few stores (no write barrier).
type member struct {
	prefix           uint64 // the key's first 8 bytes, big-endian, padded with zeros: keys whose prefixes differ are in that order
	keyStart, keyEnd int
	start            int
}

// memberEnd returns where ms[k] ends in the output, in an object whose
// '}' lands at end.
func memberEnd(ms []member, k, end int) int {
	if k+1 < len(ms) {
		return ms[k+1].start - 1
	}
	return end
}

// sortKey is a member in the sort: its prefix, and its index in the
// object's members. Two words, where a member is four, to move.
type sortKey struct {
	prefix uint64
	k      int
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

// compare compares the keys of members a and b of ms, as bytes.Compare
// does. It is inlined as far as their prefixes differ.
func compare(a, b sortKey, ms []member, s, unescaped []byte) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	return compareKeys(&ms[a.k], &ms[b.k], s, unescaped)
}

// compareKeys is compare for keys with the same prefix.
//
//go:noinline
func compareKeys(a, b *member, s, unescaped []byte) int {
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
	stack     []frame   // the open arrays and objects, innermost last
	members   []member  // the members read of the open objects, innermost last
	keys      []sortKey // an object's members, sorted when it closes
	unescaped []byte    // the keys that held escapes, decoded, one after another
	scratch   []byte    // an object's members while they are reordered, when out has no room for them
}

// skipSpaces skips the white space at s[i:], which the output leaves out,
// writing the text before it to out, and returns out, run and i past it.
// canonicalize calls it when s[i] is white space where it expected another
// byte (or is <= ' ' after '{' and '['): a compact document has none, and
// costs no test for it then. (Tested for before every token, it took 1.6 k
// instructions on benchbody.Payment1K.) (It and the other functions that
// are not inlined are given no pointer to the scanner: they return what
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

// canonicalize appends the canonical form of s to out. If s is not valid
// UTF-8, it returns an error, which may not be errNotUTF8 (Append tells):
// the bytes past ASCII are valid only in strings, where stringTail checks
// them (600 instructions less on benchbody.Payment1K than utf8.Valid
// first).
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
		keyRoom    [32]sortKey
	)
	sc := scanner{stack: stackRoom[:0], members: memberRoom[:0], keys: keyRoom[:0]}
	s = s[:len(s):len(s)] // its cap, the same value as its length: one register fewer
	run := 0              // s[run:i] is canonical as it is, and not yet in out
	i := 0
	var err error

value: // A value starts at i, maybe after white space.
	if i == len(s) {
		return nil, invalid(s, i, "expected a value")
	}
	switch c := s[i]; {
	case c == '"':
		// plain(s, i+1), its first 8 bytes inlined: most strings end within them.
		var j int
		if len(s)-i > 8 {
			if m := special(le.Uint64(s[i+1:])); m != 0 {
				j = i + 1 + bits.TrailingZeros64(m)/8
			} else {
				j = plain(s, i+9)
			}
		} else {
			j = plain(s, i+1)
		}
		if j < len(s) && s[j] == '"' {
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
	case '1' <= c && c <= '9':
		// An integer's digits inlined, as most numbers are: number for
		// the rest of the others.
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
			if j, err = number(s, i); err != nil {
				return nil, err
			}
		}
		i = j
	case c == '0' || c == '-':
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
		if isSpace(c) { // (tested for only here, as it seldom is there)
			out, run, i = skipSpaces(out, s, run, i)
			goto value
		}
		return nil, invalid(s, i, "expected a value")
	}

after: // A value ended at i: what follows depends on what holds it.
	// (White space is tested for only where what follows is not found, as
	// it seldom is there.)
	if len(sc.stack) == 0 {
		if i < len(s) {
			if isSpace(s[i]) {
				out, run, i = skipSpaces(out, s, run, i)
				goto after
			}
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
		case i < len(s) && isSpace(s[i]):
			out, run, i = skipSpaces(out, s, run, i)
			goto after
		}
		return nil, invalid(s, i, "in array")
	} else {
		if i < len(s) && s[i] == '}' {
			end := len(out) + i - run // where the '}' lands: the last member's end
			i++
			ms := sc.members[top.first:]
			sc.members, sc.stack = sc.members[:top.first], sc.stack[:len(sc.stack)-1]
			if len(ms) > 1 {
				var moved, tie, dup bool
				if sc.keys, moved, tie = sortByPrefix(sc.keys, ms); tie {
					moved, dup = sortByKey(sc.keys, ms, s, sc.unescaped)
				}
				switch {
				case dup:
					return nil, duplicate(sc.keys, ms, s, sc.unescaped)
				case moved && run <= top.open:
					// Its text is canonical as it is, and none of it is in
					// the output yet: copied from the input, in order.
					out = copySorted(out, s, run, i, ms, sc.keys)
					run = i
				case moved:
					out, run = append(out, s[run:i]...), i
					sc.scratch = reorder(out, end, ms, sc.keys, sc.scratch, len(s))
				}
			}
			goto after
		}
		if i == len(s) || s[i] != ',' {
			if i < len(s) && isSpace(s[i]) {
				out, run, i = skipSpaces(out, s, run, i)
				goto after
			}
			return nil, invalid(s, i, "in object")
		}
		i++
	}

key: // An object member starts at i, maybe after white space.
	if i == len(s) || s[i] != '"' {
		if i < len(s) && isSpace(s[i]) {
			out, run, i = skipSpaces(out, s, run, i)
			goto key
		}
		return nil, invalid(s, i, "expected object key")
	}
	// plain(s, i+1) and the key's prefix, from its first 8 bytes read once
	// (inlined: most keys end within them).
	var j int
	var prefix uint64
	if len(s)-i > 8 {
		x := le.Uint64(s[i+1:])
		if m := special(x); m != 0 {
			n := uint(bits.TrailingZeros64(m)) & 56 // 8 × the plain bytes
			j, prefix = i+1+int(n/8), bits.ReverseBytes64(x)&^(^uint64(0)>>n)
		} else {
			j, prefix = plain(s, i+9), bits.ReverseBytes64(x)
		}
	} else {
		j = plain(s, i+1)
		prefix = newMember(s[i+1:j], 0, 0, 0).prefix
	}
	if j < len(s) && s[j] == '"' { // as it is, as most are
		ms := sc.members
		if len(ms) == cap(ms) {
			ms = slices.Grow(ms, 1)
		}
		ms = ms[:len(ms)+1]
		m := &ms[len(ms)-1] // its fields stored one by one: a member{} would be built on the stack, then copied
		m.prefix, m.keyStart, m.keyEnd, m.start = prefix, i+1, j, len(out)+i-run
		sc.members = ms
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
	if i == len(s) || s[i] != ':' {
		if i < len(s) && isSpace(s[i]) {
			out, run, i = skipSpaces(out, s, run, i)
		}
		if i == len(s) || s[i] != ':' {
			return nil, invalid(s, i, "expected :")
		}
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

// isSpace reports whether c is JSON's white space: space, tab, CR or LF.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// space returns the end of JSON's white space (space, tab, CR and LF) at
// s[i:].
func space(s []byte, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// plain returns the end of the bytes at s[i:] that a string holds as they
// are in its canonical form (asIs), or of fewer: it may stop at a '^', '|'
// or '~' (special), which its callers then read as the others it stops at
// that are written as they are.
//
// It reads 8 bytes at a time (special), the last 8 of s again for the few
// bytes past a multiple of 8, where a byte at a time took 65 instructions a
// string on benchbody.Payment1K. Most strings end within their first 8
// bytes: canonicalize reads those itself, without calling plain (4.9 k
// instructions less, with the key's prefix taken from the same 8 bytes).
func plain(s []byte, i int) int {
	for ; len(s)-i >= 8; i += 8 {
		if m := special(le.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	if i == len(s) || len(s) < 8 {
		for ; i < len(s) && asIs[s[i]]; i++ {
		}
		return i
	}
	// The bytes of s[i:] only, shifted down: the zeros above them are
	// special, so that m is not 0 and points at most at len(s).
	m := special(le.Uint64(s[len(s)-8:]) >> (8 * (8 - (len(s) - i))))
	return i + bits.TrailingZeros64(m)/8
}

// special returns a word whose lowest set bit is the high bit of the first
// byte (little-endian) of x that is not asIs, or is '^', '|' or '~'; 0 if
// there is none. Each subtraction flags the bytes it borrows from, those
// equal to 0 after the xor (below 0x20 for the first), but for the bytes
// past its first borrow, which the lowest set bit is not past: the classic
// has-zero-byte test, without its &^x, as x itself flags the bytes past
// ASCII it would keep out. '<', '>' and '\\' are tested at once, with the
// seldom seen '^', '|' and '~' (the bytes that are 0x7E with bits 0x62 set):
// one test fewer a word, 550 instructions on benchbody.Payment1K.
func special(x uint64) uint64 {
	const ones = 0x0101010101010101
	ctl := x - 0x20*ones                     // below 0x20
	quoteAmp := (x | 0x04*ones) ^ 0x26*ones  // '"' 0x22, '&' 0x26
	anglesEtc := (x | 0x62*ones) ^ 0x7E*ones // '<' 0x3C, '>' 0x3E, '\\' 0x5C; '^' 0x5E, '|' 0x7C, '~' 0x7E
	return (ctl | (quoteAmp - ones) | (anglesEtc - ones) | x) & (0x80 * ones)
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
			// Written as it is but for U+2028 and U+2029, which
			// AppendQuoted escapes, if valid UTF-8: else Append's error.
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, unescaped, false, false, errNotUTF8
			}
			if r == '\u2028' || r == '\u2029' {
				rewrite = true
			}
			i += size - 1
		case !asIs[c]: // < > &, which AppendQuoted escapes
			rewrite = true
		} // (and ^ | ~, which plain stops at too)
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

// sortByPrefix sorts the members ms of an object by the prefixes of their
// keys into keys, which it returns (grown if need be), and reports whether
// any moved, or that the members are to be sorted by sortByKey instead
// (tie): two prefixes are equal, or there are more than 12 members. Most
// objects are small, and many already sorted: an insertion sort does the
// fewest comparisons on them (n-1 when sorted), and it compares prefixes
// with no call (no register saved around it).
func sortByPrefix(keys []sortKey, ms []member) (_ []sortKey, moved, tie bool) {
	keys = slices.Grow(keys[:0], len(ms))[:len(ms)]
	if len(ms) > 12 { // (where slices.SortFunc sorts by insertion too)
		return keys, false, true
	}
	keys[0] = sortKey{ms[0].prefix, 0}
	for k := 1; k < len(keys) && k < len(ms); k++ {
		key := sortKey{ms[k].prefix, k}
		j := k
		for ; j > 0 && keys[j-1].prefix > key.prefix; j-- {
			keys[j] = keys[j-1]
		}
		if j > 0 && keys[j-1].prefix == key.prefix {
			tie = true
		}
		keys[j] = key
		if j < k {
			moved = true
		}
	}
	return keys, moved, tie
}

// sortByKey sorts the members ms of an object by key into keys, as many,
// and reports whether any moved and whether two keys are equal.
//
//go:noinline
func sortByKey(keys []sortKey, ms []member, s, unescaped []byte) (moved, dup bool) {
	for k := range ms {
		keys[k] = sortKey{ms[k].prefix, k}
	}
	byKey := func(a, b sortKey) int { return compare(a, b, ms, s, unescaped) }
	if !slices.IsSortedFunc(keys, byKey) {
		slices.SortFunc(keys, byKey)
		moved = true
	}
	for k := 1; k < len(keys); k++ {
		if byKey(keys[k-1], keys[k]) == 0 {
			return moved, true
		}
	}
	return moved, false
}

// duplicate returns ErrDuplicateKey, naming the least key of the members ms
// (sorted, keys) that appears twice.
//
//go:noinline
func duplicate(keys []sortKey, ms []member, s, unescaped []byte) error {
	for k := 1; k < len(keys); k++ {
		key := ms[keys[k].k].key(s, unescaped)
		if bytes.Equal(ms[keys[k-1].k].key(s, unescaped), key) {
			return fmt.Errorf("%w: %q", ErrDuplicateKey, string(key)) // a copy: key does not escape
		}
	}
	return ErrDuplicateKey // not reached: sortByKey found two keys equal
}

// copySorted appends the object at s[run:i], which closes with its last
// member, to out, its members ms in their sorted order (keys): its text is
// canonical as it is, and none of it is in out.
//
// Most members' text, and what comes before the first one, is 32 bytes or
// less: 32 bytes are copied then, if s and out have as many from there, 8
// at a time (the bytes past it in out are written over after, or are past
// the length of the output), where copy's call to memmove, with the
// registers reloaded after it, took about 40 instructions a member. The
// members next to each other both in s and in order are copied at once.
func copySorted(out, s []byte, run, i int, ms []member, keys []sortKey) []byte {
	shift := run - len(out) // where a byte of the output would be in the input
	end := i - 1 - shift    // where its '}' lands
	if cap(out)-len(out) < i-run {
		out = slices.Grow(out, i-run)
	}
	p, dst := len(out), out[:cap(out)]
	// The text before the first member, then the members, copied by the
	// same lines twice: as a function, they are not inlined.
	if from, to := run, ms[0].start+shift; to-from > 32 || len(s)-from < 32 || len(dst)-p < 32 {
		p += copy(dst[p:], s[from:to])
	} else {
		// Through registers: *d = *s would call memmove, as they may overlap.
		s, d := (*[32]byte)(s[from:]), (*[32]byte)(dst[p:])
		a, b, c, e := le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
		le.PutUint64(d[0:], a)
		le.PutUint64(d[8:], b)
		le.PutUint64(d[16:], c)
		le.PutUint64(d[24:], e)
		p += to - from
	}
	for n := 0; n < len(keys); {
		if n > 0 {
			dst[p] = ','
			p++
		}
		// The members next in order that are next to each other in s too,
		// with the ',' between them, at once.
		k, last := keys[n].k, keys[n].k
		for n++; n < len(keys) && keys[n].k == last+1; n++ {
			last++
		}
		from, to := ms[k].start+shift, memberEnd(ms, last, end)+shift
		if to-from > 32 || len(s)-from < 32 || len(dst)-p < 32 {
			p += copy(dst[p:], s[from:to])
			continue
		}
		// As above.
		s, d := (*[32]byte)(s[from:]), (*[32]byte)(dst[p:])
		a, b, c, e := le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
		le.PutUint64(d[0:], a)
		le.PutUint64(d[8:], b)
		le.PutUint64(d[16:], c)
		le.PutUint64(d[24:], e)
		p += to - from
	}
	dst[p] = '}'
	return dst[:p+1]
}

// reorder rewrites the members ms of the object that out ends with, whose
// '}' is at out[end], in their sorted order (keys). They are put together
// past the end of out first, when its spare capacity has room for them (a
// caller that gives it as much room again as the input saves an
// allocation: nethttp does), else on the stack, if they fit in 2 KB, else
// in scratch, which it returns (grown, or made with room for size bytes).
// (The stack's 2 KB, zeroed, take 260 instructions where making scratch
// took 500 on benchbody.Payment1K, whose outer object Canonicalize's
// output has no room for.)
func reorder(out []byte, end int, ms []member, keys []sortKey, scratch []byte, size int) []byte {
	from := ms[0].start
	switch {
	case cap(out)-len(out) >= end-from:
		copy(out[from:end], appendSorted(out[len(out):], out, end, ms, keys))
	case end-from <= 2048:
		var room [2048]byte
		copy(out[from:end], appendSorted(room[:0], out, end, ms, keys))
	default:
		if scratch == nil {
			scratch = make([]byte, 0, size)
		}
		scratch = appendSorted(scratch[:0], out, end, ms, keys)
		copy(out[from:end], scratch)
	}
	return scratch // grown or not, for the next object
}

// appendSorted appends the members ms of the object whose '}' is at
// out[end] to sorted, in their sorted order (keys).
func appendSorted(sorted, out []byte, end int, ms []member, keys []sortKey) []byte {
	for n, key := range keys {
		if n > 0 {
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, out[ms[key.k].start:memberEnd(ms, key.k, end)]...)
	}
	return sorted
}
