package nethttp

import "strings"

// keyError says why an Idempotency-Key header was refused. Its reason is safe
// to show the client: it never quotes the key.
type keyError struct {
	Reason string // why, in a sentence without a capital or a period
}

// Error returns the reason; the front doors wrap it with idempotent.ErrInvalidKey.
func (e *keyError) Error() string { return e.Reason }

// The reasons ParseKey refuses a key.
var (
	errKeyEmpty    = &keyError{"the Idempotency-Key header is empty"}
	errKeyTooLong  = &keyError{"the Idempotency-Key is longer than 255 characters"}
	errKeyChars    = &keyError{"the Idempotency-Key must consist of printable ASCII characters (visible ones unless quoted)"}
	errKeyComma    = &keyError{"the Idempotency-Key holds a comma: send a single key, quoted if it contains a comma"}
	errKeyQuoting  = &keyError{`the Idempotency-Key is not a valid quoted string (RFC 8941: "...", with only \" and \\ escaped)`}
	errKeyMultiple = &keyError{"the request holds more than one Idempotency-Key header"}
)

// ParseKey returns the idempotency key carried by the values of the
// Idempotency-Key header; "" and no error when the header is absent.
//
// Two forms are accepted. The draft's form, an RFC 8941 sf-string ("abc",
// with \" and \\ the only escapes), holds printable ASCII including space.
// The bare form Stripe's clients send (abc) holds visible ASCII except the
// comma: payload v2 joins repeated headers with commas, so a bare comma
// cannot be told from two keys. Both forms of the same key are the same key.
// Surrounding spaces and tabs are ignored. An error says why the key is
// refused in a sentence safe to show the client (the middleware answers it
// 400 invalid-key); it never quotes the key.
func ParseKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", errKeyMultiple
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", errKeyEmpty
	}
	var key string
	if v[0] == '"' {
		k, err := unquote(v)
		if err != nil {
			return "", err
		}
		key = k
	} else {
		for i := 0; i < len(v); i++ {
			switch c := v[i]; {
			case c == ',':
				return "", errKeyComma
			case c <= ' ' || c > '~':
				return "", errKeyChars
			}
		}
		key = v
	}
	switch {
	case key == "":
		return "", errKeyEmpty
	case len(key) > MaxKeyLength:
		return "", errKeyTooLong
	}
	return key, nil
}

// unquote decodes an RFC 8941 sf-string that makes up all of v (v[0] is the
// opening quote). Parameters and anything else after the closing quote are
// refused.
func unquote(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errKeyQuoting
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errKeyQuoting
			}
			return b.String(), nil
		case c < ' ' || c > '~':
			return "", errKeyChars
		default:
			b.WriteByte(c)
		}
		if b.Len() > MaxKeyLength {
			return "", errKeyTooLong
		}
	}
	return "", errKeyQuoting // no closing quote
}
