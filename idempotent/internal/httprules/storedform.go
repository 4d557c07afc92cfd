package httprules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// The stored form is written and read on every request of the HTTP front
// doors, so it is encoded and decoded by hand: encoding/json's reflection
// cost a first run 1.75 µs and 6 allocations (BenchmarkEncode), a replay
// 3.7 µs and 20 allocations (BenchmarkDecode), a fifth of the middleware's
// in-process cost and more than the ceiling of make bench's client CPU
// (wrapped/bare <= 1.03) leaves. The bytes are json.Marshal's, which stay
// the definition (storedform_codec_test.go checks the two against each
// other); a record the fast reader does not recognize is read by
// json.Unmarshal.

// Encode serializes a stored form for the record: json.Marshal's bytes are
// the stored format (struct fields in order, map keys sorted, strings
// escaped as canonjson.AppendQuoted escapes them), written into one buffer
// of the exact size.
func Encode(r *Response) ([]byte, error) {
	var room [16]string // the sorted names of most responses' headers
	single := sortedKeys(room[:0], r.Headers)
	multi := sortedKeys(room[len(single):len(single)], r.MultiValueHeaders)

	var num [20]byte
	status := strconv.AppendInt(num[:0], int64(r.StatusCode), 10)
	n := len(`{"statusCode":}`) + len(status)
	if len(single) > 0 {
		n += len(`,"headers":{}`)
		for _, k := range single {
			n += canonjson.QuotedLen(k) + len(`:`) + canonjson.QuotedLen(r.Headers[k]) + len(`,`)
		}
		n -= len(`,`) // after the last
	}
	if len(multi) > 0 {
		n += len(`,"multiValueHeaders":{}`)
		for _, k := range multi {
			n += canonjson.QuotedLen(k) + len(`:`) + listLen(r.MultiValueHeaders[k]) + len(`,`)
		}
		n -= len(`,`)
	}
	if len(r.Cookies) > 0 {
		n += len(`,"cookies":`) + listLen(r.Cookies)
	}
	if r.Body != "" {
		n += len(`,"body":`) + canonjson.QuotedLen(r.Body)
	}
	if r.IsBase64Encoded {
		n += len(`,"isBase64Encoded":true`)
	}

	b := make([]byte, 0, n)
	b = append(append(b, `{"statusCode":`...), status...)
	if len(single) > 0 {
		b = append(b, `,"headers":{`...)
		for i, k := range single {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(canonjson.AppendQuoted(b, k), ':')
			b = canonjson.AppendQuoted(b, r.Headers[k])
		}
		b = append(b, '}')
	}
	if len(multi) > 0 {
		b = append(b, `,"multiValueHeaders":{`...)
		for i, k := range multi {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(canonjson.AppendQuoted(b, k), ':')
			b = appendList(b, r.MultiValueHeaders[k])
		}
		b = append(b, '}')
	}
	if len(r.Cookies) > 0 {
		b = appendList(append(b, `,"cookies":`...), r.Cookies)
	}
	if r.Body != "" {
		b = canonjson.AppendQuoted(append(b, `,"body":`...), r.Body)
	}
	if r.IsBase64Encoded {
		b = append(b, `,"isBase64Encoded":true`...)
	}
	return append(b, '}'), nil
}

// sortedKeys appends m's keys to dst, sorted as json.Marshal sorts them.
func sortedKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

// listLen is the length of appendList(nil, vs).
func listLen(vs []string) int {
	if vs == nil {
		return len("null")
	}
	n := len("[]")
	for i, v := range vs {
		if i > 0 {
			n += len(",")
		}
		n += canonjson.QuotedLen(v)
	}
	return n
}

// appendList appends vs as json.Marshal writes a []string: null when nil.
func appendList(b []byte, vs []string) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = canonjson.AppendQuoted(b, v)
	}
	return append(b, ']')
}

// Decode reads a stored form before it is replayed. A status no front door
// ever stores means the record is not an HTTP front door's, or is damaged:
// replaying it would answer garbage.
//
// A record as Encode writes it (and json.Marshal wrote it before) is read by
// hand, its strings sharing one copy of raw; any other is read by
// json.Unmarshal, which defines the result.
func Decode(raw []byte) (*Response, error) {
	r, ok := decodeEncoded(raw)
	if !ok {
		r = new(Response)
		if err := json.Unmarshal(raw, r); err != nil {
			return nil, err
		}
	}
	if !Storable(r.StatusCode) {
		return nil, fmt.Errorf("stored status code %d", r.StatusCode)
	}
	return r, nil
}

// decodeEncoded reads a record in the exact shape Encode writes: no white
// space, the fields in order, each at most once, strings of valid UTF-8
// with json.Marshal's escapes. ok is false for anything else (then nothing
// is decided about raw: json.Unmarshal reads it).
func decodeEncoded(raw []byte) (r *Response, ok bool) {
	d := storedReader{s: string(raw)} // one copy, which the strings share
	r = new(Response)
	if !d.literal(`{"statusCode":`) {
		return nil, false
	}
	if r.StatusCode, ok = d.status(); !ok {
		return nil, false
	}
	if d.literal(`,"headers":{`) {
		r.Headers = make(map[string]string, 4)
		for first := true; !d.literal("}"); first = false {
			if !first && !d.literal(",") {
				return nil, false
			}
			k, ok := d.member()
			if !ok {
				return nil, false
			}
			if r.Headers[k], ok = d.str(); !ok {
				return nil, false
			}
		}
	}
	if d.literal(`,"multiValueHeaders":{`) {
		r.MultiValueHeaders = make(map[string][]string, 4)
		var values []string // every header's values, each a capped part of it
		for first := true; !d.literal("}"); first = false {
			if !first && !d.literal(",") {
				return nil, false
			}
			k, ok := d.member()
			if !ok {
				return nil, false
			}
			if d.literal("null") {
				r.MultiValueHeaders[k] = nil
				continue
			}
			lo := len(values)
			if values, ok = d.list(values); !ok {
				return nil, false
			}
			r.MultiValueHeaders[k] = values[lo:len(values):len(values)] // capped: an append copies
		}
	}
	if d.literal(`,"cookies":`) {
		if r.Cookies, ok = d.list(nil); !ok {
			return nil, false
		}
	}
	if d.literal(`,"body":`) {
		if r.Body, ok = d.str(); !ok {
			return nil, false
		}
	}
	if d.literal(`,"isBase64Encoded":`) {
		switch {
		case d.literal("true"):
			r.IsBase64Encoded = true
		case !d.literal("false"):
			return nil, false
		}
	}
	if !d.literal("}") || d.pos != len(d.s) {
		return nil, false
	}
	return r, true
}

// storedReader reads a stored form in Encode's shape.
type storedReader struct {
	s   string // the record
	pos int    // the next byte of s to read
}

// literal reads lit if it comes next, and reports whether it did.
func (d *storedReader) literal(lit string) bool {
	if strings.HasPrefix(d.s[d.pos:], lit) {
		d.pos += len(lit)
		return true
	}
	return false
}

// status reads a status code: 1 to 9 digits, not starting with 0 (any
// other number is json.Unmarshal's to judge).
func (d *storedReader) status() (int, bool) {
	start := d.pos
	for d.pos < len(d.s) && d.pos-start < 9 && '0' <= d.s[d.pos] && d.s[d.pos] <= '9' {
		d.pos++
	}
	if d.pos == start || d.s[start] == '0' || d.pos < len(d.s) && '0' <= d.s[d.pos] && d.s[d.pos] <= '9' {
		return 0, false
	}
	n, err := strconv.Atoi(d.s[start:d.pos])
	return n, err == nil
}

// member reads an object member's name and its colon.
func (d *storedReader) member() (string, bool) {
	k, ok := d.str()
	return k, ok && d.literal(":")
}

// list reads a list of strings, appending them to values, which it returns
// non-nil.
func (d *storedReader) list(values []string) ([]string, bool) {
	if !d.literal("[") {
		return nil, false
	}
	if values == nil {
		values = make([]string, 0, 2)
	}
	for first := true; !d.literal("]"); first = false {
		if !first && !d.literal(",") {
			return nil, false
		}
		v, ok := d.str()
		if !ok {
			return nil, false
		}
		values = append(values, v)
	}
	return values, true
}

// str reads a string: a part of s when it holds no escape, else decoded
// into a string of its own. It refuses (false) what json.Marshal never
// writes and json.Unmarshal treats apart: invalid UTF-8, control
// characters, escaped surrogates.
func (d *storedReader) str() (string, bool) {
	if !d.literal(`"`) {
		return "", false
	}
	start := d.pos
	for ; d.pos < len(d.s); d.pos++ {
		switch c := d.s[d.pos]; {
		case c == '"':
			s := d.s[start:d.pos]
			d.pos++
			return s, utf8.ValidString(s)
		case c == '\\':
			return d.unescape(start)
		case c < ' ':
			return "", false
		}
	}
	return "", false
}

// unescape decodes the rest of a string that starts at start and holds an
// escape at d.pos.
func (d *storedReader) unescape(start int) (string, bool) {
	// Decoded, a string is never longer than its escaped form: find where
	// that ends, for one allocation.
	end := d.pos
	for end < len(d.s) && d.s[end] != '"' {
		if d.s[end] == '\\' {
			end++
		}
		end++
	}
	var b strings.Builder
	b.Grow(min(end, len(d.s)) - start)
	b.WriteString(d.s[start:d.pos])
	for d.pos < len(d.s) {
		c := d.s[d.pos]
		switch {
		case c == '"':
			d.pos++
			return b.String(), utf8.ValidString(b.String())
		case c < ' ':
			return "", false
		case c != '\\':
			b.WriteByte(c)
			d.pos++
			continue
		}
		if d.pos+1 == len(d.s) {
			return "", false
		}
		switch e := d.s[d.pos+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(d.s[d.pos+2:])
			if r < 0 || utf16.IsSurrogate(r) {
				return "", false
			}
			b.WriteRune(r)
			d.pos += 6
			continue
		default:
			return "", false
		}
		d.pos += 2
	}
	return "", false
}

// hex4 returns the value of the 4 hex digits s starts with, or -1.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
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
