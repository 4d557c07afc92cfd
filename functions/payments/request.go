package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a payment request.
const (
	// MaxAmount is the largest amount accepted, in minor units: eight digits,
	// as card processors commonly allow (999,999.99 in a two-decimal currency).
	MaxAmount = 99_999_999
	// MaxCustomerIDLength is the longest customerId accepted, in bytes.
	MaxCustomerIDLength = 128
	// maxParams bounds the invalid-params listed in one answer.
	maxParams = 10
	// maxNameEcho bounds an unknown field name echoed back to the client.
	maxNameEcho = 64
)

// Request is a validated POST /payments body.
type Request struct {
	// CustomerID identifies the customer being charged: 1 to
	// MaxCustomerIDLength bytes, no control characters or surrounding space.
	CustomerID string
	// Amount is in minor units (cents for EUR): an integer from 1 to MaxAmount.
	Amount int64
	// Currency is an ISO 4217 code in upper case, such as EUR.
	Currency string
}

// InvalidParam is one reason a request body was refused: the member
// "invalid-params" of RFC 9457's example, one entry per field.
type InvalidParam struct {
	// Name is the JSON field, or "" for the body as a whole.
	Name string `json:"name"`
	// Reason says what is wrong, without quoting the value sent.
	Reason string `json:"reason"`
}

// ValidationError lists why a request body was refused.
type ValidationError struct {
	// Params are the reasons, in body order; at most ten are kept.
	Params []InvalidParam
}

// Error lists the reasons on one line.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Params))
	for i, p := range e.Params {
		if p.Name == "" {
			parts[i] = p.Reason
		} else {
			parts[i] = p.Name + " " + p.Reason
		}
	}
	return "payments: invalid request: " + strings.Join(parts, "; ")
}

func (e *ValidationError) add(name, reason string) {
	if len(e.Params) < maxParams {
		e.Params = append(e.Params, InvalidParam{Name: name, Reason: reason})
	}
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// ParseRequest decodes and validates a POST /payments body strictly: one JSON
// object with exactly the fields customerId (string), amount (integer) and
// currency (string), each once; no other fields, no trailing data. Amounts
// are minor units written as JSON integers: 12.5, 12.0, 1e3 and "12" are all
// refused, so that no rounding or type coercion ever decides how much is
// charged. It returns a *ValidationError listing every problem found.
func ParseRequest(body []byte) (Request, error) {
	var req Request
	verr := &ValidationError{}
	fields, err := objectFields(body)
	if err != nil {
		verr.add("", err.Error())
		return req, verr
	}
	seen := map[string]bool{}
	for _, f := range fields {
		switch f.name {
		case "customerId", "amount", "currency":
			seen[f.name] = true
		default:
			verr.add(echo(f.name), "is not a known field (expected customerId, amount and currency)")
		}
	}
	for _, name := range []string{"customerId", "amount", "currency"} {
		if !seen[name] {
			verr.add(name, "is required")
		}
	}
	for _, f := range fields {
		var reason string
		switch f.name {
		case "customerId":
			req.CustomerID, reason = customerID(f.value)
		case "amount":
			req.Amount, reason = amount(f.value)
		case "currency":
			req.Currency, reason = currency(f.value)
		default:
			continue
		}
		if reason != "" {
			verr.add(f.name, reason)
		}
	}
	if len(verr.Params) > 0 {
		return Request{}, verr
	}
	return req, nil
}

type field struct {
	name  string
	value json.RawMessage
}

var errNotObject = errors.New("the request body must be a JSON object")

// objectFields splits a JSON object into its members, in order, refusing
// invalid JSON, anything but an object, duplicate names and trailing data.
func objectFields(body []byte) ([]field, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("the request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("the request body is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var fields []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("the request body is not valid JSON")
		}
		name, _ := tok.(string) // inside an object, the decoder only yields string names
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errors.New("the request body is not valid JSON")
		}
		if seen[name] {
			return nil, fmt.Errorf("the request body holds the field %s more than once", strconv.Quote(echo(name)))
		}
		seen[name] = true
		fields = append(fields, field{name, v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, errors.New("the request body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the request body holds data after the JSON object")
	}
	return fields, nil
}

func customerID(raw json.RawMessage) (string, string) {
	s, reason := jsonString(raw)
	switch {
	case reason != "":
		return "", reason
	case s == "":
		return "", "must not be empty"
	case len(s) > MaxCustomerIDLength:
		return "", fmt.Sprintf("must be at most %d bytes long", MaxCustomerIDLength)
	case !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl):
		return "", "must not contain control characters"
	case strings.TrimSpace(s) != s:
		return "", "must not begin or end with white space"
	}
	return s, ""
}

func amount(raw json.RawMessage) (int64, string) {
	const integer = "must be an integer number of minor units, such as 1250 for 12.50"
	s := string(raw)
	switch {
	case s == "null":
		return 0, "is required"
	case s[0] == '"':
		return 0, integer + ", not a string"
	case s[0] != '-' && (s[0] < '0' || s[0] > '9'):
		return 0, integer
	case strings.ContainsAny(s, ".eE"):
		return 0, integer + ", without a fraction or exponent"
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && s[0] == '-':
		return 0, "must be greater than 0"
	case err != nil:
		return 0, fmt.Sprintf("must be at most %d", MaxAmount)
	case n <= 0:
		return 0, "must be greater than 0"
	case n > MaxAmount:
		return 0, fmt.Sprintf("must be at most %d", MaxAmount)
	}
	return n, ""
}

func currency(raw json.RawMessage) (string, string) {
	s, reason := jsonString(raw)
	switch {
	case reason != "":
		return "", reason
	case !currencyCode.MatchString(s):
		return "", "must be a three-letter ISO 4217 code in upper case, such as EUR"
	}
	return s, ""
}

// jsonString decodes a JSON string; the reason is set when raw is not one.
func jsonString(raw json.RawMessage) (string, string) {
	if string(raw) == "null" {
		return "", "is required"
	}
	if raw[0] != '"' {
		return "", "must be a string"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "must be a string"
	}
	return s, ""
}

// echo shortens a client-chosen field name before it is repeated back.
func echo(name string) string {
	if len(name) <= maxNameEcho {
		return name
	}
	cut := maxNameEcho
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// isJSON reports whether a Content-Type is application/json, with or
// without parameters such as charset=utf-8.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
