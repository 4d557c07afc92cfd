package httprules

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Response is an HTTP response in the form of an API Gateway proxy response
// (either payload version), and the form in which every HTTP front door
// stores a response: its JSON is the record's data, so field names are a
// stored format (add fields, never rename them).
//
// Body is a Go string, as in the events package: a body that is not valid
// UTF-8 is carried base64-encoded (IsBase64Encoded), or the JSON encoding of
// the response replaces its invalid bytes.
type Response struct {
	StatusCode        int                 `json:"statusCode"`                  // the HTTP status
	Headers           map[string]string   `json:"headers,omitempty"`           // single-value headers (API Gateway)
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"` // the net/http middleware's headers, all here
	Cookies           []string            `json:"cookies,omitempty"`           // payload 2.0 cookies
	Body              string              `json:"body,omitempty"`              // base64 when IsBase64Encoded
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`   // Body is base64
}

// Storable reports whether a response with this status is stored and
// replayed: 2xx to 4xx, except the transient 408, 409, 425 and 429, whose
// retry may well succeed.
func Storable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status <= 499
}

// NotStoredError makes the core release the record of a response whose
// status is never stored (5xx and transient 4xx): the client's retry runs
// again.
type NotStoredError struct {
	Status int // the response's status
}

// Error names the status.
func (e *NotStoredError) Error() string {
	return fmt.Sprintf("idempotent: status %d is not stored", e.Status)
}

// Encode serializes a stored form for the record.
func Encode(r *Response) ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		// Cannot happen for a form made by Filter.Stored: strings (valid
		// UTF-8, see AsSent), an int and a bool.
		return nil, fmt.Errorf("idempotent: encode the response: %w", err)
	}
	return raw, nil
}

// Decode reads a stored form before it is replayed. A status no front door
// ever stores means the record is not an
// HTTP front door's, or is damaged: replaying it would answer garbage.
func Decode(raw []byte) (*Response, error) {
	var r Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if !Storable(r.StatusCode) {
		return nil, fmt.Errorf("stored status code %d", r.StatusCode)
	}
	return &r, nil
}

// Filter decides which response headers are stored and replayed. Build it
// once with NewFilter; it is safe for concurrent use.
type Filter struct {
	drop          map[string]bool // lower-case names never stored
	replayCookies bool
}

// NewFilter returns the filter that leaves out hop-by-hop headers, Date,
// Idempotent-Replayed, the volatile headers (lower-case names) and, unless
// replayCookies, Set-Cookie.
func NewFilter(volatile []string, replayCookies bool) *Filter {
	f := &Filter{drop: make(map[string]bool), replayCookies: replayCookies}
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
// are as the client received them from the Lambda runtime (see AsSent).
func (f *Filter) Stored(r *Response) Response {
	listed := map[string]bool{} // API Gateway merges both header maps
	for _, v := range append(HeaderValues(r.Headers, nil, "Connection"), HeaderValues(nil, r.MultiValueHeaders, "Connection")...) {
		for name := range strings.SplitSeq(v, ",") {
			listed[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	keep := func(name string) bool {
		n := strings.ToLower(name)
		return !f.drop[n] && !listed[n] && !strings.HasPrefix(n, "proxy-")
	}
	s := Response{StatusCode: r.StatusCode, Body: AsSent(r.Body), IsBase64Encoded: r.IsBase64Encoded}
	for k, v := range r.Headers {
		if keep(k) {
			if s.Headers == nil {
				s.Headers = make(map[string]string, len(r.Headers))
			}
			s.Headers[AsSent(k)] = AsSent(v)
		}
	}
	for k, v := range r.MultiValueHeaders {
		if keep(k) {
			if s.MultiValueHeaders == nil {
				s.MultiValueHeaders = make(map[string][]string, len(r.MultiValueHeaders))
			}
			vs := make([]string, len(v))
			for i := range v {
				vs[i] = AsSent(v[i])
			}
			s.MultiValueHeaders[AsSent(k)] = vs
		}
	}
	if f.replayCookies && r.Cookies != nil {
		s.Cookies = make([]string, len(r.Cookies))
		for i := range r.Cookies {
			s.Cookies[i] = AsSent(r.Cookies[i])
		}
	}
	return s
}

// AsSent is s as the client received it: the Lambda runtime sends the
// response as JSON, which turns each byte that is not valid UTF-8 into
// U+FFFD. The stored form holds the same, so a replay equals what the first
// client got, and its JSON decodes to exactly what was encoded.
func AsSent(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // one U+FFFD per invalid byte, as encoding/json
}

// HeaderValues returns the values of header name, matched case-insensitively:
// those in multi when it holds the name (API Gateway's multiValueHeaders),
// else those in single. Names that differ only in case (possible in
// hand-written events) are read in sorted order, so the result is stable.
func HeaderValues(single map[string]string, multi map[string][]string, name string) []string {
	var names []string
	for k := range multi {
		if strings.EqualFold(k, name) {
			names = append(names, k)
		}
	}
	var out []string
	if len(names) > 0 {
		slices.Sort(names)
		for _, k := range names {
			out = append(out, multi[k]...)
		}
		return out
	}
	for k := range single {
		if strings.EqualFold(k, name) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		out = append(out, single[k])
	}
	return out
}
