package nethttp

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// storedResponse is an HTTP response in the form of an API Gateway proxy response
// (either payload version), and the form in which every HTTP front door
// stores a response: its JSON is the record's data, so field names are a
// stored format (add fields, never rename them).
//
// Body is a Go string, as in the events package: a body that is not valid
// UTF-8 is carried base64-encoded (IsBase64Encoded), or the JSON encoding of
// the response replaces its invalid bytes.
type storedResponse struct {
	StatusCode        int                 `json:"statusCode"`                  // the HTTP status
	Headers           map[string]string   `json:"headers,omitempty"`           // single-value headers (API Gateway)
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"` // the net/http middleware's headers, all here
	Cookies           []string            `json:"cookies,omitempty"`           // payload 2.0 cookies
	Body              string              `json:"body,omitempty"`              // base64 when IsBase64Encoded
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`   // Body is base64
}

// storable reports whether a response with this status is stored and
// replayed: 2xx to 4xx, except the transient 408, 409, 425 and 429, whose
// retry may well succeed.
func storable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status <= 499
}

// notStoredError makes the core release the record of a response whose
// status is never stored (5xx and transient 4xx): the client's retry runs
// again.
type notStoredError struct {
	Status int // the response's status
}

// Error names the status.
func (e *notStoredError) Error() string {
	return fmt.Sprintf("idempotent: status %d is not stored", e.Status)
}

// encodeStored serializes a stored form for the record, in exactly the
// bytes json.Marshal writes for it (storedform_test.go checks it against
// json.Marshal): fields in order, empty ones left out, map keys sorted,
// strings escaped as json.Marshal escapes them. It is written by hand, as
// readStored reads it: json.Marshal's reflection took about 8 k
// instructions per first run of either HTTP front door (callgrind, bench's
// drive -door http), a sixth of what the doors add to a bare handler
// (issue 35 item 6 bounds it); by hand, the middleware's first run takes
// about 4 k fewer (callgrind on BenchmarkMiddleware/first-run).
func encodeStored(r *storedResponse) []byte {
	size := len(`{"statusCode":,"headers":{},"multiValueHeaders":{},"cookies":[],"body":"","isBase64Encoded":true}`) + 20 + len(r.Body)
	for k, v := range r.Headers {
		size += len(k) + len(v) + len(`"":"",`)
	}
	for k, vs := range r.MultiValueHeaders {
		size += len(k) + len(`"":[],`)
		for _, v := range vs {
			size += len(v) + len(`"",`)
		}
	}
	for _, c := range r.Cookies {
		size += len(c) + len(`"",`)
	}
	b := make([]byte, 0, size) // escapes aside, the one allocation
	b = append(b, `{"statusCode":`...)
	b = strconv.AppendInt(b, int64(r.StatusCode), 10)
	if len(r.Headers) > 0 {
		b = appendObject(append(b, `,"headers":`...), r.Headers, canonjson.AppendQuoted)
	}
	if len(r.MultiValueHeaders) > 0 {
		b = appendObject(append(b, `,"multiValueHeaders":`...), r.MultiValueHeaders, appendList)
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
	return append(b, '}')
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

// appendObject appends m as json.Marshal writes a map: its keys in byte
// order, each value as value writes it.
func appendObject[V any](b []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	var room [16]string // the keys, to sort: most responses' fit
	keys := room[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = value(append(canonjson.AppendQuoted(b, k), ':'), m[k])
	}
	return append(b, '}')
}

// decodeStored reads a stored form before it is replayed (see readStored). A
// status no front door ever stores means the record is not an HTTP front
// door's, or is damaged: replaying it would answer garbage.
func decodeStored(raw []byte) (*storedResponse, error) {
	r, err := readStored(raw)
	if err != nil {
		return nil, err
	}
	if !storable(r.StatusCode) {
		return nil, fmt.Errorf("stored status code %d", r.StatusCode)
	}
	return r, nil
}

// headerFilter decides which response headers are stored and replayed. Build it
// once with newHeaderFilter; it is safe for concurrent use.
type headerFilter struct {
	drop          map[string]bool // lower-case names never stored
	replayCookies bool
}

// newHeaderFilter returns the filter that leaves out hop-by-hop headers, Date,
// Idempotent-Replayed, the volatile headers (lower-case names) and, unless
// replayCookies, Set-Cookie.
func newHeaderFilter(volatile []string, replayCookies bool) *headerFilter {
	f := &headerFilter{drop: make(map[string]bool), replayCookies: replayCookies}
	for _, h := range [...]string{"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "date", strings.ToLower(HeaderReplayed)} {
		f.drop[h] = true
	}
	for _, h := range volatile {
		f.drop[strings.ToLower(h)] = true
	}
	if !replayCookies {
		f.drop["set-cookie"] = true
	}
	return f
}

// Stored is the part of a response that is stored and replayed: all of it
// but hop-by-hop headers (including those the Connection header names),
// Date, volatile headers and, unless cookies are replayed, cookies. Strings
// are as the client received them from the Lambda runtime (see asSent).
//
// It runs on every first run: ordinary (ASCII) header names are matched
// without allocating, all the kept values share one slice, and the names a
// Connection header lists are gathered only when there is one. A response
// whose headers are all kept as they are (the usual net/http response)
// shares its MultiValueHeaders map with the result: the front doors only
// encode it.
func (f *headerFilter) Stored(r *storedResponse) storedResponse {
	if s, ok := f.storedWhole(r); ok {
		return s
	}
	s, connection := f.stored(r, nil)
	if connection {
		s, _ = f.stored(r, connectionListed(r)) // rare: filter again, without what it lists
	}
	return s
}

// storedWhole is Stored of a response with only multi-value headers, every
// one kept, and nothing for asSent to change, without copying them; ok is
// false for any other response. A nil value list is left to stored, which
// stores it as an empty one.
func (f *headerFilter) storedWhole(r *storedResponse) (s storedResponse, ok bool) {
	if len(r.Headers) > 0 || (f.replayCookies && r.Cookies != nil) {
		return storedResponse{}, false
	}
	for k, v := range r.MultiValueHeaders {
		// Connection is dropped, so a kept header is never listed in one.
		if v == nil || !utf8.ValidString(k) || !f.keep(k, nil) {
			return storedResponse{}, false
		}
		for _, x := range v {
			if !utf8.ValidString(x) {
				return storedResponse{}, false
			}
		}
	}
	s = storedResponse{StatusCode: r.StatusCode, Body: asSent(r.Body), IsBase64Encoded: r.IsBase64Encoded}
	if len(r.MultiValueHeaders) > 0 {
		s.MultiValueHeaders = r.MultiValueHeaders
	}
	return s, true
}

// stored is Stored with the names the Connection headers list; connection
// reports whether r has a Connection header.
func (f *headerFilter) stored(r *storedResponse, listed map[string]bool) (s storedResponse, connection bool) {
	s = storedResponse{StatusCode: r.StatusCode, Body: asSent(r.Body), IsBase64Encoded: r.IsBase64Encoded}
	for k, v := range r.Headers {
		connection = connection || strings.EqualFold(k, "Connection")
		if f.keep(k, listed) {
			if s.Headers == nil {
				s.Headers = make(map[string]string, len(r.Headers))
			}
			s.Headers[asSent(k)] = asSent(v)
		}
	}
	var values []string // the kept values, each header's a capped part of it
	for k, v := range r.MultiValueHeaders {
		connection = connection || strings.EqualFold(k, "Connection")
		if f.keep(k, listed) {
			if s.MultiValueHeaders == nil {
				s.MultiValueHeaders = make(map[string][]string, len(r.MultiValueHeaders))
				values = make([]string, 0, len(r.MultiValueHeaders)) // a value each, usually
			}
			lo := len(values)
			for _, x := range v {
				values = append(values, asSent(x)) // growing leaves the parts made before where they are
			}
			s.MultiValueHeaders[asSent(k)] = values[lo:len(values):len(values)] // capped: an append copies; non-nil for a nil v
		}
	}
	if f.replayCookies && r.Cookies != nil {
		s.Cookies = make([]string, len(r.Cookies))
		for i := range r.Cookies {
			s.Cookies[i] = asSent(r.Cookies[i])
		}
	}
	return s, connection
}

// connectionListed is the set of lower-case names the Connection headers
// list: API Gateway merges both header maps.
func connectionListed(r *storedResponse) map[string]bool {
	listed := map[string]bool{}
	add := func(v string) {
		for name := range strings.SplitSeq(v, ",") {
			listed[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	for k, v := range r.Headers {
		if strings.EqualFold(k, "Connection") {
			add(v)
		}
	}
	for k, vs := range r.MultiValueHeaders {
		if strings.EqualFold(k, "Connection") {
			for _, v := range vs {
				add(v)
			}
		}
	}
	return listed
}

// keep reports whether header name is stored: not dropped by the filter,
// not listed in Connection, not Proxy-*, all matched on its strings.ToLower
// form. An ASCII name is lower-cased into a stack buffer (a map lookup by
// string(buf) does not allocate); any other goes through strings.ToLower,
// whose Unicode mapping (invalid bytes to U+FFFD, K to k...) it must match.
func (f *headerFilter) keep(name string, listed map[string]bool) bool {
	var buf [128]byte
	if len(name) > len(buf) || !lowerASCII(buf[:], name) {
		n := strings.ToLower(name)
		return !f.drop[n] && !listed[n] && !strings.HasPrefix(n, "proxy-")
	}
	n := buf[:len(name)]
	return !f.drop[string(n)] && !listed[string(n)] && !(len(n) >= len("proxy-") && string(n[:len("proxy-")]) == "proxy-")
}

// lowerASCII writes name lower-cased into buf (as long as name) and reports
// whether name is all ASCII, where that is what strings.ToLower does.
func lowerASCII(buf []byte, name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= utf8.RuneSelf:
			return false
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return true
}

// asSent is s as the client received it: the Lambda runtime sends the
// response as JSON, which turns each byte that is not valid UTF-8 into
// U+FFFD. The stored form holds the same, so a replay equals what the first
// client got, and its JSON decodes to exactly what was encoded.
func asSent(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // one U+FFFD per invalid byte, as encoding/json
}
