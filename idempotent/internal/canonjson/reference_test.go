package canonjson_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// referenceCanonicalize is canonjson's first implementation (v0.x), kept as
// the definition of the canonical form: it walks encoding/json's
// Decoder.Token, re-encodes strings with json.Marshal and keeps numbers as
// written. Its output is part of stored fingerprints, so the fast
// implementation must match it byte for byte, and reject exactly what it
// rejects, with the same error class (TestDifferential, FuzzDifferential).
// Do not change it.
func referenceCanonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not valid UTF-8", canonjson.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out := make([]byte, 0, len(data))
	out, err := refAppendValue(out, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", canonjson.ErrInvalid)
	}
	return out, nil
}

func refAppendValue(out []byte, dec *json.Decoder, depth int) ([]byte, error) {
	if depth > canonjson.MaxDepth {
		return nil, canonjson.ErrTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", canonjson.ErrInvalid, err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return refAppendObject(out, dec, depth)
		case '[':
			return refAppendArray(out, dec, depth)
		default:
			return nil, fmt.Errorf("%w: unexpected %q", canonjson.ErrInvalid, v)
		}
	case string:
		return refAppendString(out, v), nil
	case json.Number:
		return append(out, v...), nil
	case bool:
		return strconv.AppendBool(out, v), nil
	case nil:
		return append(out, "null"...), nil
	default:
		return nil, fmt.Errorf("%w: unexpected token %T", canonjson.ErrInvalid, tok)
	}
}

type refMember struct {
	key   string
	value []byte
}

func refAppendObject(out []byte, dec *json.Decoder, depth int) ([]byte, error) {
	var members []refMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", canonjson.ErrInvalid, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: object key is not a string", canonjson.ErrInvalid)
		}
		value, err := refAppendValue(nil, dec, depth+1)
		if err != nil {
			return nil, err
		}
		members = append(members, refMember{key: key, value: value})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("%w: %w", canonjson.ErrInvalid, err)
	}
	slices.SortFunc(members, func(a, b refMember) int { return refCompareStrings(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return nil, fmt.Errorf("%w: %q", canonjson.ErrDuplicateKey, m.key)
			}
			out = append(out, ',')
		}
		out = refAppendString(out, m.key)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

func refAppendArray(out []byte, dec *json.Decoder, depth int) ([]byte, error) {
	out = append(out, '[')
	first := true
	for dec.More() {
		if !first {
			out = append(out, ',')
		}
		first = false
		var err error
		if out, err = refAppendValue(out, dec, depth+1); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, fmt.Errorf("%w: %w", canonjson.ErrInvalid, err)
	}
	return append(out, ']'), nil
}

func refCompareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func refAppendString(out []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(out, b...)
}
