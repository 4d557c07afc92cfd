package httprules

// The stored form's JSON, written and read by hand: Encode and Decode are on
// every first run and replay of both HTTP front doors, where encoding/json's
// reflection cost more than the rest of the stored form's handling. The
// bytes are a stored format: appendResponse writes exactly what
// json.Marshal writes for a *Response (storedform_ref_test.go keeps that
// reference, and the differential tests and fuzz targets hold the two
// together), and parseStoredForm reads only that exact shape (fields in
// order, no white space, only Encode's escapes; a character Encode would
// escape is also taken raw, as json.Unmarshal takes it), leaving everything
// else to json.Unmarshal, so the result is json.Unmarshal's in every case.
// Strings are written by canonjson.AppendQuoted, json.Marshal's escaping,
// the one escaper the canonical form of request bodies uses too.

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/canonjson"
)

// Field openings, in the order json.Marshal writes Response's fields.
const (
	keyStatus  = `{"statusCode":`
	keyHeaders = `,"headers":{`
	keyMulti   = `,"multiValueHeaders":{`
	keyCookies = `,"cookies":[`
	keyBody    = `,"body":`
	keyBase64  = `,"isBase64Encoded":true`
)

// asciiEscapes holds, for each ASCII byte, its escape in a JSON string as
// Encode writes it (canonjson.AppendQuoted, json.Marshal's escaping), or ""
// for a byte written as it is: the escapes readString takes back.
var asciiEscapes = func() (t [utf8.RuneSelf]string) {
	for b := range t {
		if q := canonjson.AppendQuoted(nil, string(rune(b))); len(q) > len(`"x"`) {
			t[b] = string(q[1 : len(q)-1])
		}
	}
	return t
}()

// shortUnescapes maps the letter of each two-byte escape Encode writes to
// the byte it stands for; 0 marks every other letter.
var shortUnescapes = func() (t [256]byte) {
	for b, esc := range asciiEscapes {
		if len(esc) == 2 {
			t[esc[1]] = byte(b)
		}
	}
	return t
}()

// rawInString says which ASCII bytes readString takes as they are, a table
// lookup at a time: all but the control characters, " and \ (also < > &,
// which Encode escapes, as json.Unmarshal takes them).
var rawInString = func() (t [256]bool) {
	for b := range byte(utf8.RuneSelf) {
		t[b] = b >= ' ' && b != '"' && b != '\\'
	}
	return t
}()

// member is a map's member, collected for sorting.
type member[V any] struct {
	name  string
	value V
}

// sortedMembers returns m's members in json.Marshal's order (names
// byte-wise), in buf when they fit, so a small map's members take no
// allocation and no lookup.
func sortedMembers[V any](m map[string]V, buf []member[V]) []member[V] {
	list := buf[:0]
	for k, v := range m {
		list = append(list, member[V]{k, v})
	}
	if len(list) > len(buf) {
		slices.SortFunc(list, func(a, b member[V]) int { return strings.Compare(a.name, b.name) })
		return list
	}
	for i := 1; i < len(list); i++ { // insertion sort: few members, and names are distinct
		for j := i; j > 0 && list[j].name < list[j-1].name; j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	return list
}

// encodedLen is the length of r's JSON, so Encode allocates its output
// once.
func encodedLen(r *Response) int {
	n := len(keyStatus) + intLen(r.StatusCode) + len("}")
	if len(r.Headers) > 0 {
		n += len(keyHeaders) + len(r.Headers) - 1 + len("}") // commas between members
		for k, v := range r.Headers {
			n += canonjson.QuotedLen(k) + len(":") + canonjson.QuotedLen(v)
		}
	}
	if len(r.MultiValueHeaders) > 0 {
		n += len(keyMulti) + len(r.MultiValueHeaders) - 1 + len("}")
		for k, vs := range r.MultiValueHeaders {
			n += canonjson.QuotedLen(k) + len(":") + listLen(vs)
		}
	}
	if len(r.Cookies) > 0 {
		n += len(keyCookies) - len("[") + listLen(r.Cookies)
	}
	if r.Body != "" {
		n += len(keyBody) + canonjson.QuotedLen(r.Body)
	}
	if r.IsBase64Encoded {
		n += len(keyBase64)
	}
	return n
}

// intLen is the length of strconv.Itoa(n), without its allocation.
func intLen(n int) int {
	if 100 <= n && n <= 999 { // every HTTP status
		return 3
	}
	var buf [24]byte
	return len(strconv.AppendInt(buf[:0], int64(n), 10))
}

// listLen is the length of vs as a JSON array of strings: null when nil.
func listLen(vs []string) int {
	if vs == nil {
		return len("null")
	}
	n := len("[]")
	for i, v := range vs {
		if i > 0 {
			n++
		}
		n += canonjson.QuotedLen(v)
	}
	return n
}

// appendList appends vs as a JSON array of strings, null when nil.
func appendList(dst []byte, vs []string) []byte {
	if vs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canonjson.AppendQuoted(dst, v)
	}
	return append(dst, ']')
}

// appendResponse appends r's JSON as json.Marshal writes it: fields in
// declaration order, the omitempty ones left out when empty, map keys
// sorted.
func appendResponse(dst []byte, r *Response) []byte {
	dst = append(dst, keyStatus...)
	if s := r.StatusCode; 100 <= s && s <= 999 {
		dst = append(dst, byte('0'+s/100), byte('0'+s/10%10), byte('0'+s%10))
	} else {
		dst = strconv.AppendInt(dst, int64(s), 10)
	}
	if len(r.Headers) > 0 {
		dst = appendObject(dst, keyHeaders, r.Headers, canonjson.AppendQuoted)
	}
	if len(r.MultiValueHeaders) > 0 {
		dst = appendObject(dst, keyMulti, r.MultiValueHeaders, appendList)
	}
	if len(r.Cookies) > 0 {
		dst = append(dst, keyCookies[:len(keyCookies)-1]...)
		dst = appendList(dst, r.Cookies)
	}
	if r.Body != "" {
		dst = append(dst, keyBody...)
		dst = canonjson.AppendQuoted(dst, r.Body)
	}
	if r.IsBase64Encoded {
		dst = append(dst, keyBase64...)
	}
	return append(dst, '}')
}

// appendObject appends the member that starts with key (its name, colon
// and opening brace), for m not empty, its values written by appendValue.
// Its members are sorted on the stack when there are no more than an
// ordinary response's (a function of its own, so that only a map there is
// pays for clearing the buffer).
func appendObject[V any](dst []byte, key string, m map[string]V, appendValue func([]byte, V) []byte) []byte {
	var buf [16]member[V]
	dst = append(dst, key...)
	for i, h := range sortedMembers(m, buf[:]) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canonjson.AppendQuoted(dst, h.name)
		dst = append(dst, ':')
		dst = appendValue(dst, h.value)
	}
	return append(dst, '}')
}

// span is a string parseStoredForm decoded: bytes lo to hi of its text.
type span struct{ lo, hi int }

// multiEntry is a multiValueHeaders member parseStoredForm read: its name,
// and its values as a range of the parser's values, or null.
type multiEntry struct {
	name   span
	lo, hi int
	null   bool
}

// formParser reads a stored form in the exact shape appendResponse writes.
// Every string's decoded bytes go to one text, in one allocation, and the
// form's strings are cut from it once the whole form is read.
type formParser struct {
	raw  []byte
	i    int             // the next byte of raw
	text strings.Builder // the decoded strings, one after the other
}

// parseStoredForm decodes raw when it is in the exact shape appendResponse
// writes, fields in its order, with the result json.Unmarshal would give;
// ok is false for anything else, which Decode leaves to json.Unmarshal. It
// never errs itself: refusing is json.Unmarshal's job.
func parseStoredForm(raw []byte) (r *Response, ok bool) {
	// Room on the stack for the members of an ordinary response (the lists
	// are locals, not parser fields, for the stack to hold them).
	var (
		headerBuf [16]span
		multiBuf  [8]multiEntry
		valueBuf  [16]span
		cookieBuf [4]span
	)
	headers, multi, values, cookies := headerBuf[:0], multiBuf[:0], valueBuf[:0], cookieBuf[:0]
	p := formParser{raw: raw}
	if !p.literal(keyStatus) {
		return nil, false
	}
	status, ok := p.readInt()
	if !ok {
		return nil, false
	}
	p.text.Grow(len(raw)) // a decoded string is never longer than its JSON
	hasHeaders := p.literal(keyHeaders)
	if hasHeaders {
		if headers, ok = p.readHeaders(headers); !ok {
			return nil, false
		}
	}
	hasMulti := p.literal(keyMulti)
	if hasMulti {
		if multi, values, ok = p.readMulti(multi, values); !ok {
			return nil, false
		}
	}
	hasCookies := p.literal(keyCookies)
	if hasCookies {
		if cookies, ok = p.readStrings(cookies); !ok {
			return nil, false
		}
	}
	var body span
	if p.literal(keyBody) {
		if body, ok = p.readString(); !ok {
			return nil, false
		}
	}
	base64 := p.literal(keyBase64)
	if !p.literal("}") || p.i != len(raw) {
		return nil, false
	}

	// Build the Response as json.Unmarshal does: maps and slices that
	// appear in the JSON are non-nil, even when empty.
	text := p.text.String()
	cut := func(s span) string { return text[s.lo:s.hi] }
	r = &Response{StatusCode: status, Body: cut(body), IsBase64Encoded: base64}
	if hasHeaders {
		r.Headers = make(map[string]string, len(headers)/2)
		for i := 0; i < len(headers); i += 2 {
			r.Headers[cut(headers[i])] = cut(headers[i+1]) // a repeated name: the last wins, as in json.Unmarshal
		}
	}
	if hasMulti {
		r.MultiValueHeaders = make(map[string][]string, len(multi))
		all := make([]string, len(values)) // every header's values in one allocation
		for i, s := range values {
			all[i] = cut(s)
		}
		for _, m := range multi {
			if m.null {
				r.MultiValueHeaders[cut(m.name)] = nil
			} else {
				r.MultiValueHeaders[cut(m.name)] = all[m.lo:m.hi:m.hi] // capped: an append copies
			}
		}
	}
	if hasCookies {
		r.Cookies = make([]string, len(cookies))
		for i, s := range cookies {
			r.Cookies[i] = cut(s)
		}
	}
	return r, true
}

// literal consumes s if raw continues with it.
func (p *formParser) literal(s string) bool {
	if len(p.raw)-p.i < len(s) || string(p.raw[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// readInt reads the status as strconv.AppendInt writes it: no "-0", no
// leading zero, no fraction or exponent, within an int (json.Unmarshal
// refuses more).
func (p *formParser) readInt() (int, bool) {
	const maxDigits = 19 // any int64, and no overflow of a uint64
	neg := p.literal("-")
	start := p.i
	var u uint64
	for p.i < len(p.raw) && isDigit(p.raw[p.i]) {
		if p.i-start == maxDigits {
			return 0, false
		}
		u = u*10 + uint64(p.raw[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (p.raw[start] == '0' && (digits > 1 || neg)) {
		return 0, false
	}
	var n int64
	switch {
	case neg && u <= 1<<63:
		n = -int64(u) // for 1<<63, int64(u) is already -1<<63, its own negation
	case !neg && u <= 1<<63-1:
		n = int64(u)
	default:
		return 0, false
	}
	if int64(int(n)) != n {
		return 0, false // past a 32-bit int
	}
	return int(n), true
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// readHeaders reads the members of the headers object, its opening brace
// read, up to its closing brace: "name":"value", appended to list as name
// and value.
func (p *formParser) readHeaders(list []span) ([]span, bool) {
	if p.literal("}") {
		return list, true
	}
	for {
		name, ok := p.readString()
		if !ok || !p.literal(":") {
			return list, false
		}
		value, ok := p.readString()
		if !ok {
			return list, false
		}
		list = append(list, name, value)
		if p.literal("}") {
			return list, true
		}
		if !p.literal(",") {
			return list, false
		}
	}
}

// readMulti reads the members of the multiValueHeaders object, its opening
// brace read, up to its closing brace: "name":null or "name":["value",...],
// appended to multi, their values to values.
func (p *formParser) readMulti(multi []multiEntry, values []span) ([]multiEntry, []span, bool) {
	if p.literal("}") {
		return multi, values, true
	}
	for {
		name, ok := p.readString()
		if !ok || !p.literal(":") {
			return multi, values, false
		}
		m := multiEntry{name: name, lo: len(values)}
		switch {
		case p.literal("null"):
			m.null = true
		case p.literal("["):
			if values, ok = p.readStrings(values); !ok {
				return multi, values, false
			}
		default:
			return multi, values, false
		}
		m.hi = len(values)
		multi = append(multi, m)
		if p.literal("}") {
			return multi, values, true
		}
		if !p.literal(",") {
			return multi, values, false
		}
	}
}

// readStrings reads the strings of an array whose opening bracket is read, up
// to its closing bracket, appending them to list.
func (p *formParser) readStrings(list []span) ([]span, bool) {
	if p.literal("]") {
		return list, true
	}
	for {
		s, ok := p.readString()
		if !ok {
			return list, false
		}
		list = append(list, s)
		if p.literal("]") {
			return list, true
		}
		if !p.literal(",") {
			return list, false
		}
	}
}

// readString reads a JSON string as Encode writes it, decoding it into text:
// valid UTF-8 (characters Encode would escape are taken as they are, as
// json.Unmarshal takes them), and only Encode's escapes. A
// control character, invalid UTF-8, or any other escape (\/, \u00E9, a
// surrogate...) is left to json.Unmarshal, which refuses it or decodes it
// its own way.
func (p *formParser) readString() (span, bool) {
	if !p.literal(`"`) {
		return span{}, false
	}
	lo := p.text.Len()
	raw := p.raw
	start := p.i // the first byte not yet copied to text
	for i := p.i; i < len(raw); {
		if rawInString[raw[i]] {
			i++
			continue
		}
		switch b := raw[i]; {
		case b == '"':
			p.text.Write(raw[start:i])
			p.i = i + 1
			return span{lo, p.text.Len()}, true
		case b == '\\':
			p.text.Write(raw[start:i])
			n, ok := p.unescape(raw[i:])
			if !ok {
				return span{}, false
			}
			i += n
			start = i
		case b < ' ':
			return span{}, false // json.Unmarshal refuses it
		default:
			c, size := utf8.DecodeRune(raw[i:])
			if c == utf8.RuneError && size == 1 {
				return span{}, false // json.Unmarshal replaces it
			}
			i += size
		}
	}
	return span{}, false // unterminated
}

// unescape decodes the escape esc starts with, if it is one Encode writes,
// and returns its length.
func (p *formParser) unescape(esc []byte) (int, bool) {
	if len(esc) < 2 {
		return 0, false
	}
	if b := shortUnescapes[esc[1]]; b != 0 {
		p.text.WriteByte(b)
		return 2, true
	}
	if esc[1] != 'u' || len(esc) < 6 {
		return 0, false
	}
	switch u := string(esc[:6]); u {
	case `\u2028`:
		p.text.WriteRune('\u2028')
	case `\u2029`:
		p.text.WriteRune('\u2029')
	case `\ufffd`:
		p.text.WriteRune(utf8.RuneError)
	default:
		b, ok := lowerHexByte(esc[4], esc[5])
		if !ok || b >= utf8.RuneSelf || asciiEscapes[b] != u {
			return 0, false
		}
		p.text.WriteByte(b)
	}
	return 6, true
}

// lowerHexByte is the byte two lower-case hex digits stand for.
func lowerHexByte(hi, lo byte) (byte, bool) {
	h, ok1 := lowerHexDigit(hi)
	l, ok2 := lowerHexDigit(lo)
	return h<<4 | l, ok1 && ok2
}

// lowerHexDigit is the value of a lower-case hex digit.
func lowerHexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
