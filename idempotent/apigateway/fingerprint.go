package apigateway

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"mime"
	"strings"

	"github.com/idemkit/idemkit/internal/canonjson"
)

// bodyError says why a body that claims to be JSON was refused. Its reason is
// safe to show the client: it never quotes the body.
type bodyError struct{ reason string }

func (e *bodyError) Error() string { return "apigateway: " + e.reason }

// fingerprint is the request material a duplicate must repeat to be replayed:
// method, path, canonical query and body, each length-prefixed so no two
// requests share an encoding. A base64 body is decoded first; a body whose
// Content-Type is JSON is canonicalized (key order and white space do not
// count; numbers are kept as written, so values beyond 2^53 stay distinct);
// any other body counts byte for byte. The core hashes the result.
func fingerprint(r *request) ([]byte, error) {
	kind, body := "raw", []byte(r.body)
	if r.base64 {
		if dec, err := base64.StdEncoding.DecodeString(r.body); err == nil {
			kind, body = "bytes", dec
		} else {
			// API Gateway does not send this; counting the text as given keeps
			// the fingerprint exact, and the handler decides what to answer.
			kind = "bad-base64"
		}
	}
	if len(body) > 0 && isJSON(r.contentType) {
		canon, err := canonjson.Canonicalize(body)
		switch {
		case errors.Is(err, canonjson.ErrDuplicateKey):
			return nil, &bodyError{"the JSON request body holds an object with a duplicate key"}
		case errors.Is(err, canonjson.ErrTooDeep):
			return nil, &bodyError{"the JSON request body is nested too deeply"}
		case err != nil:
			return nil, &bodyError{"the request body is not valid JSON, as its Content-Type says it is"}
		}
		kind, body = "json", canon
	}
	const tag = "idemkit/apigateway/fingerprint/v1"
	fp := make([]byte, 0, len(tag)+len(r.method)+len(r.path)+len(r.query)+len(kind)+len(body)+5*binary.MaxVarintLen64)
	fp = append(fp, tag...)
	for _, part := range [...][]byte{[]byte(r.method), []byte(r.path), []byte(r.query), []byte(kind), body} {
		fp = binary.AppendUvarint(fp, uint64(len(part)))
		fp = append(fp, part...)
	}
	return fp, nil
}

// isJSON reports whether a Content-Type names JSON: application/json or any
// structured +json type (application/problem+json, application/vnd.api+json,
// application/merge-patch+json, ...), whatever its parameters.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}
