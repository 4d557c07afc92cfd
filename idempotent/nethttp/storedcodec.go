package nethttp

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A record is read on every replay of both HTTP front doors, so the record
// encodeStored writes is read by hand: json.Unmarshal's reflection took
// 25 k instructions per replay (callgrind, bench's drive -door http and
// -door apigw), the hand-written reader 8 k, and the ceiling on what the
// doors add to a bare handler (1.05, issue 35 item 6) does not leave the
// difference. json.Unmarshal stays the definition (storedcodec_test.go
// checks the reader against it) and reads any record that is not in
// json.Marshal's shape. encodeStored writes by hand too, in json.Marshal's
// bytes (see there).

// readStored reads a record: by hand when it has the shape json.Marshal
// writes (encodeStored), else with json.Unmarshal, which defines the result.
func readStored(raw []byte) (*storedResponse, error) {
	if r, ok := readEncoded(raw); ok {
		return r, nil
	}
	r := new(storedResponse)
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, err
	}
	return r, nil
}

// readEncoded reads a record in the exact shape json.Marshal writes: no
// white space, the fields in order, each at most once, strings of valid
// UTF-8 with json.Marshal's escapes. ok is false for anything else (then
// nothing is decided about raw: json.Unmarshal reads it).
func readEncoded(raw []byte) (r *storedResponse, ok bool) {
	d := storedReader{s: string(raw)} // one copy, which the strings share
	r = new(storedResponse)
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

// storedReader reads a record in json.Marshal's shape.
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
		plain := d.pos // a run of bytes that stand for themselves, written at once
		for d.pos < len(d.s) && d.s[d.pos] != '"' && d.s[d.pos] != '\\' && d.s[d.pos] >= ' ' {
			d.pos++
		}
		b.WriteString(d.s[plain:d.pos])
		switch {
		case d.pos == len(d.s):
			return "", false
		case d.s[d.pos] == '"':
			d.pos++
			return b.String(), utf8.ValidString(b.String())
		case d.s[d.pos] < ' ', d.pos+1 == len(d.s):
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
