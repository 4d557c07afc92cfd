package batch

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// validator is the method a record type may have to refuse invalid records.
type validator interface{ Validate() error }

// DecodeJSON decodes data into T and validates it (when T or *T has a method
// Validate() error). An error wraps invalid when data is not JSON, is JSON
// null or does not decode into T, and invalidValue when Validate fails. Its
// errors never quote data: encoding/json's errors are reduced to offsets,
// field names and types, because the errors of custom unmarshalers
// (time.Time's among them) may quote their input. Errors returned by Validate
// are kept as written.
func DecodeJSON[T any](data []byte, invalid, invalidValue error) (T, error) {
	var v T
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return v, fmt.Errorf("%w: JSON null", invalid)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%w: %s", invalid, describeJSONError[T](err))
	}
	if err := Validate(&v); err != nil {
		return v, fmt.Errorf("%w: %w", invalidValue, err)
	}
	return v, nil
}

// DecodeBase64JSON is DecodeJSON of base64 data (Amazon MQ's), whose error,
// when data is not base64, wraps invalid.
func DecodeBase64JSON[T any](data string, invalid, invalidValue error) (T, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%w: not base64", invalid)
	}
	return DecodeJSON[T](b, invalid, invalidValue)
}

// Validate calls Validate on *v or v, when either has the method.
func Validate[T any](v *T) error {
	if x, ok := any(*v).(validator); ok {
		return x.Validate()
	}
	if x, ok := any(v).(validator); ok {
		return x.Validate()
	}
	return nil
}

func describeJSONError[T any](err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		// Value is the kind of JSON value, but for numbers that do not fit it
		// goes on with the number itself ("number 1e999").
		kind, _, _ := strings.Cut(typ.Value, " ")
		if typ.Field != "" {
			return fmt.Sprintf("cannot decode a JSON %s into field %s of type %v", kind, typ.Field, typ.Type)
		}
		return fmt.Sprintf("cannot decode a JSON %s into %v", kind, typ.Type)
	default:
		return fmt.Sprintf("cannot decode into %v (%T)", reflect.TypeFor[T](), err)
	}
}
