package apigateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/internal/bodybuf"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// errNoMethod refuses an event without an HTTP method: not an API Gateway
// proxy request of the payload version the door was made for (a payload
// 2.0 event given to HandlerV1 has none, and the reverse), so whether it
// needs an Idempotency-Key cannot be told.
var errNoMethod = errors.New("the event carries no HTTP method: it is not an API Gateway proxy request of the payload format version this function expects")

// newRequest is the HTTP request of an event: path as called (its escaped
// form, for the fingerprint, is path itself when path is a valid escaped
// path), raw query, header, body (decoded when base64; a body that does not
// decode, which API Gateway never sends, is taken as it is, and the handler
// decides what to answer), with ctx, its URL and body reader in room.
func newRequest(ctx context.Context, room *requestRoom, method, path, query string, header http.Header, body string, b64 bool) *http.Request {
	u := &room.url
	*u = url.URL{Path: path, RawQuery: query}
	if p, err := url.PathUnescape(path); err == nil && p != path {
		u.Path, u.RawPath = p, path
	}
	// A value, which WithContext copies: one Request on the heap, not two.
	r := http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Body: http.NoBody}
	if b64 {
		if dec, err := base64.StdEncoding.DecodeString(body); err == nil {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(dec)), int64(len(dec))
			return r.WithContext(ctx)
		}
	}
	if body != "" {
		room.body.Reset(body)
		r.Body, r.ContentLength = &room.body, int64(len(body))
	}
	return r.WithContext(ctx)
}

// requestRoom is the memory of an event's request that can live in its
// invocation's allocation, as long as it: its URL and its body's reader
// (two allocations fewer per event).
type requestRoom struct {
	url  url.URL
	body stringBody
}

// stringBody is an event's body as a request's: io.NopCloser's, in one
// allocation fewer.
type stringBody struct{ strings.Reader }

// Close does nothing.
func (*stringBody) Close() error { return nil }

// addSingle adds an event's single-value headers to h under their
// canonical names, none of which h holds yet.
func addSingle(h http.Header, m map[string]string) {
	before := len(h)
	values := make([]string, len(m)) // one slice for all values, each header's a capped part
	i := 0
	for k, v := range m {
		values[i] = v
		h[canonicalKey(k)] = values[i : i+1 : i+1]
		i++
	}
	if len(h)-before < len(m) { // two names with one canonical form: set in the map's order, set again in theirs
		mergeSorted(h, m, func(v string) []string { return []string{v} })
	}
}

// canonicalKey is http.CanonicalHeaderKey(name), without allocating for
// the lower-case names API Gateway (payload 2.0) sends most often, which
// net/http does not intern itself (it does Content-Type, User-Agent, ...).
// A switch, which the compiler makes a binary search: a third of a map
// lookup's instructions per header (issue 35 bounds the door's instructions
// per request). apiGatewayHeaders lists its names, for the tests.
func canonicalKey(name string) string {
	switch name {
	case "idempotency-key":
		return nethttp.HeaderIdempotencyKey
	case "authorization":
		return "Authorization"
	case "x-amzn-trace-id":
		return "X-Amzn-Trace-Id"
	case "x-forwarded-port":
		return "X-Forwarded-Port"
	case "x-forwarded-proto":
		return "X-Forwarded-Proto"
	case "x-forwarded-for":
		return "X-Forwarded-For"
	case "content-type":
		return "Content-Type"
	case "content-length":
		return "Content-Length"
	case "accept":
		return "Accept"
	case "accept-encoding":
		return "Accept-Encoding"
	case "host":
		return "Host"
	case "user-agent":
		return "User-Agent"
	case "origin":
		return "Origin"
	case "referer":
		return "Referer"
	case "x-request-id":
		return "X-Request-Id"
	case "x-api-key":
		return "X-Api-Key"
	case "x-amz-date":
		return "X-Amz-Date"
	case "x-amz-security-token":
		return "X-Amz-Security-Token"
	case "cookie":
		return "Cookie"
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(name)
}

// apiGatewayHeaders are the names canonicalKey knows, in canonical form.
var apiGatewayHeaders = []string{nethttp.HeaderIdempotencyKey, "Authorization", "X-Amzn-Trace-Id", "X-Forwarded-Port",
	"X-Forwarded-Proto", "X-Forwarded-For", "Content-Type", "Content-Length", "Accept", "Accept-Encoding", "Host", "User-Agent",
	"Origin", "Referer", "X-Request-Id", "X-Api-Key", "X-Amz-Date", "X-Amz-Security-Token", "Cookie", "Traceparent", "Tracestate"}

// addMulti adds an event's multi-value headers to h under their canonical
// names, none of which h holds yet.
func addMulti(h http.Header, m map[string][]string) {
	clash := false
	for k, vs := range m {
		ck := http.CanonicalHeaderKey(k)
		if _, ok := h[ck]; ok {
			clash = true
			continue
		}
		h[ck] = vs
	}
	if clash {
		mergeSorted(h, m, func(vs []string) []string { return vs })
	}
}

// mergeSorted gives each canonical name that two names of m share (names
// differing only in case, possible in hand-written events) the values of
// those names in their sorted order, so the result never depends on the
// map's order.
func mergeSorted[V any](h http.Header, m map[string]V, values func(V) []string) {
	names := make(map[string][]string, len(m)) // by canonical name
	for k := range m {
		ck := http.CanonicalHeaderKey(k)
		names[ck] = append(names[ck], k)
	}
	for ck, ks := range names {
		if len(ks) < 2 {
			continue
		}
		slices.Sort(ks)
		var vs []string
		for _, k := range ks {
			vs = append(vs, values(m[k])...)
		}
		h[ck] = vs
	}
}

// writeResponse writes an event response to w: its headers (the
// multi-value ones win, as API Gateway merges them), cookies as Set-Cookie,
// status and body, decoded when base64. Strings are as the client received
// them through the Lambda runtime's JSON (asSent1). A status no HTTP
// response can have (below 200, above 999) or a base64 body that does not
// decode makes API Gateway answer 502: a 502 is written, which is not
// stored. It returns what it wrote.
func writeResponse(w http.ResponseWriter, status int, single map[string]string, multi map[string][]string, cookies []string, body string, b64 bool) written {
	var decoded []byte
	if b64 {
		var err error
		if decoded, err = base64.StdEncoding.DecodeString(body); err != nil {
			status = 0
		}
	}
	if status < 200 || status > 999 {
		w.WriteHeader(http.StatusBadGateway)
		return written{status: http.StatusBadGateway}
	}
	h := w.Header()
	values := make([]string, len(single)) // one slice for all single values
	i := 0
	for k, v := range single {
		if _, ok := multi[k]; !ok {
			values[i] = asSent1(v)
			h[asSent1(k)] = values[i : i+1 : i+1]
			i++
		}
	}
	if len(multi) > 0 { // most responses have none: no iteration begun
		for k, vs := range multi {
			h[asSent1(k)] = asSent(vs)
		}
	}
	if len(cookies) > 0 {
		h["Set-Cookie"] = append(slices.Clip(h["Set-Cookie"]), asSent(cookies)...)
	}
	w.WriteHeader(status)
	if b64 {
		_, _ = w.Write(decoded)
		return written{status: status, raw: decoded}
	}
	body = asSent1(body)
	if body != "" {
		_, _ = io.WriteString(w, body)
	}
	return written{status: status, body: body}
}

// written is what writeResponse wrote: its status and body (raw when it
// was decoded from base64).
type written struct {
	status int
	body   string
	raw    []byte
}

// answered reports whether rec answered with what was written: the same
// status and body.
func (w *written) answered(rec *recorder) bool {
	if w.raw != nil {
		return rec.status == w.status && rec.body.String() == string(w.raw)
	}
	return rec.status == w.status && rec.body.String() == w.body
}

// asSent1 is s as the client receives it: the Lambda runtime sends the
// response as JSON, which turns each byte that is not valid UTF-8 into
// U+FFFD.
func asSent1(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // one U+FFFD per invalid byte, as encoding/json
}

// asSent is vs, each as asSent1 gives it: vs itself when it is
// all valid UTF-8.
func asSent(vs []string) []string {
	for i, v := range vs {
		if !utf8.ValidString(v) {
			out := slices.Clone(vs)
			for j := i; j < len(out); j++ {
				out[j] = asSent1(out[j])
			}
			return out
		}
	}
	return vs
}

// recorder is the http.ResponseWriter of the http.Handler behind a door:
// what it writes is kept, for the event response.
type recorder struct {
	header http.Header
	status int
	body   bodybuf.Buffer
}

// Header implements http.ResponseWriter.
func (w *recorder) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

// WriteHeader implements http.ResponseWriter: the first status counts.
func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// Write implements http.ResponseWriter.
func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// WriteString is Write without a copy of s.
func (w *recorder) WriteString(s string) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.WriteString(s)
}

// headers splits the recorded header into API Gateway's maps: a header
// with one value in single, with more in multi, and with cookies (payload
// 2.0) Set-Cookie in cookies. Content-Length is left to API Gateway, which
// frames the response itself.
func (w *recorder) headers(withCookies bool) (single map[string]string, multi map[string][]string, cookies []string) {
	for k, vs := range w.header {
		switch {
		case len(vs) == 0 || strings.EqualFold(k, "Content-Length"):
		case withCookies && strings.EqualFold(k, "Set-Cookie"):
			cookies = append(cookies, vs...)
		case len(vs) == 1:
			if single == nil {
				single = make(map[string]string, len(w.header))
			}
			single[k] = vs[0]
		default:
			if multi == nil {
				multi = make(map[string][]string)
			}
			multi[k] = vs
		}
	}
	return single, multi, cookies
}

// bodyOf is the recorded body as an event response's: as it is when it is
// valid UTF-8, else base64.
func (w *recorder) bodyOf() (body string, b64 bool) {
	if s := w.body.String(); utf8.ValidString(s) {
		return s, false
	}
	return base64.StdEncoding.EncodeToString([]byte(w.body.String())), true
}
