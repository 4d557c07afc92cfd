package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 512

// Errors returned by Canonicalize.
var (
	ErrInvalid      = errors.New("canonjson: invalid JSON")
	ErrDuplicateKey = errors.New("canonjson: duplicate object key")
	ErrTooDeep      = errors.New("canonjson: nesting too deep")
)

// Canonicalize returns the canonical form of one JSON value: objects with keys
// sorted by their UTF-8 bytes, no insignificant white space, strings re-escaped
// the way encoding/json writes them, and numbers kept exactly as written (so
// 12345678901234567891 and 12345678901234567890 stay distinct). Duplicate object
// keys, invalid UTF-8, trailing data and nesting deeper than MaxDepth are errors.
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out := make([]byte, 0, len(data))
	out, err := appendValue(out, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalid)
	}
	return out, nil
}

func appendValue(out []byte, dec *json.Decoder, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, ErrTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return appendObject(out, dec, depth)
		case '[':
			return appendArray(out, dec, depth)
		default:
			return nil, fmt.Errorf("%w: unexpected %q", ErrInvalid, v)
		}
	case string:
		return appendString(out, v), nil
	case json.Number:
		return append(out, v...), nil
	case bool:
		return strconv.AppendBool(out, v), nil
	case nil:
		return append(out, "null"...), nil
	default:
		return nil, fmt.Errorf("%w: unexpected token %T", ErrInvalid, tok)
	}
}

type member struct {
	key   string
	value []byte
}

func appendObject(out []byte, dec *json.Decoder, depth int) ([]byte, error) {
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: object key is not a string", ErrInvalid)
		}
		value, err := appendValue(nil, dec, depth+1)
		if err != nil {
			return nil, err
		}
		members = append(members, member{key: key, value: value})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	slices.SortFunc(members, func(a, b member) int { return compareStrings(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return nil, fmt.Errorf("%w: %q", ErrDuplicateKey, m.key)
			}
			out = append(out, ',')
		}
		out = appendString(out, m.key)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

func appendArray(out []byte, dec *json.Decoder, depth int) ([]byte, error) {
	out = append(out, '[')
	first := true
	for dec.More() {
		if !first {
			out = append(out, ',')
		}
		first = false
		var err error
		if out, err = appendValue(out, dec, depth+1); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return append(out, ']'), nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func appendString(out []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(out, b...)
}
