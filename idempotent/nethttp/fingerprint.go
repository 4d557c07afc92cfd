package nethttp

import (
	"encoding/binary"
	"errors"
	"mime"
	"net/url"
	"slices"
	"strings"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// bodyError says why a body that claims to be JSON was refused. Its reason is
// safe to show the client: it never quotes the body.
type bodyError struct {
	Reason string // why, in a sentence without a capital or a period
}

// Error returns the reason; the front doors wrap it with
// idempotent.ErrInvalidPayload.
func (e *bodyError) Error() string { return e.Reason }

// requestError says why a request was refused as malformed (an event without
// a method, a body that cannot be read). Its reason is safe to show the
// client.
type requestError struct {
	Reason string // why, in a sentence without a capital or a period
}

// Error returns the reason.
func (e *requestError) Error() string { return e.Reason }

// fpRequest is the part of an HTTP request a duplicate must repeat.
type fpRequest struct {
	Method      string // upper case
	Path        string // as called (escaped)
	Query       string // canonical: see canonicalRawQuery
	ContentType string // the Content-Type header: JSON bodies are compared canonically
	Body        []byte // as received (an API Gateway event's base64 body decoded)
}

// fingerprintTag starts every fingerprint: a stored format (see
// appendFingerprint).
const fingerprintTag = "idemkit/apigateway/fingerprint/v1"

// FingerprintRoom is the room appendFingerprint takes in dst for r beyond
// the length of r.Body (a JSON body's canonical form is usually no longer):
// a front door that reads the body into a buffer with this much more
// capacity after it fingerprints the request without another allocation.
func (r *fpRequest) FingerprintRoom() int {
	return len(fingerprintTag) + len(r.Method) + len(r.Path) + len(r.Query) + len("json") + 5*binary.MaxVarintLen64
}

// appendFingerprint appends to dst the request material a duplicate must
// repeat to be replayed, and returns the extended buffer (dst unchanged in
// length on error), so that a front door can reuse one buffer across
// requests: method, path, canonical query and body, each length-prefixed so
// no two requests share an encoding. A body whose Content-Type is JSON is
// canonicalized (key order and white space do not count; numbers are kept as
// written, so values beyond 2^53 stay distinct); any other body counts byte
// for byte. The core hashes the result.
//
// The encoding is part of the stored records (their validation hash): it
// must never change for a given request, or retries in flight during an
// upgrade would get 422.
func appendFingerprint(dst []byte, r *fpRequest) ([]byte, error) {
	kind, body := "raw", r.Body
	isJSON := len(body) > 0 && isJSON(r.ContentType)
	if isJSON {
		kind = "json"
	}
	fp := slices.Grow(dst, r.FingerprintRoom()+len(body))
	fp = append(fp, fingerprintTag...)
	for _, part := range [...]string{r.Method, r.Path, r.Query, kind} {
		fp = binary.AppendUvarint(fp, uint64(len(part)))
		fp = append(fp, part...)
	}
	if !isJSON {
		fp = binary.AppendUvarint(fp, uint64(len(body)))
		return append(fp, body...), nil
	}
	// The canonical body's length comes before it and is known only after
	// it is written: write it past room for the longest length, then move
	// it back next to its length (one buffer, no copy of the body aside).
	at := len(fp)
	fp, err := canonjson.Append(fp[:at+binary.MaxVarintLen64], body)
	switch {
	case errors.Is(err, canonjson.ErrDuplicateKey):
		return dst, &bodyError{"the JSON request body holds an object with a duplicate key"}
	case errors.Is(err, canonjson.ErrTooDeep):
		return dst, &bodyError{"the JSON request body is nested too deeply"}
	case err != nil:
		return dst, &bodyError{"the request body is not valid JSON, as its Content-Type says it is"}
	}
	canon := len(fp) - at - binary.MaxVarintLen64
	n := binary.PutUvarint(fp[at:], uint64(canon))
	copy(fp[at+n:], fp[at+binary.MaxVarintLen64:])
	return fp[:at+n+canon], nil
}

// isJSON reports whether a Content-Type names JSON: application/json or any
// structured +json type (application/problem+json, application/vnd.api+json,
// application/merge-patch+json, ...), whatever its parameters.
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true // the usual case, without parsing (ParseMediaType allocates)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// canonicalRawQuery sorts the parameters of a raw query string by name,
// keeping the order of a name's values (it may carry meaning, as in a list),
// and escapes them uniformly: "b=2&a=1" and "a=1&b=2" are the same query. A
// query that does not parse counts as given.
func canonicalRawQuery(raw string) string {
	if raw == "" {
		return ""
	}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return "\x00raw\x00" + raw
	}
	return values.Encode()
}
