package httprules

// The first implementations of Encode, Decode and Filter.Stored, kept as
// the references the hand-written ones must equal (storedform_test.go).

import (
	"encoding/json"
	"fmt"
	"strings"
)

// referenceEncode is Encode as it was: json.Marshal, whose bytes are the
// stored format.
func referenceEncode(r *Response) ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("idempotent: encode the response: %w", err)
	}
	return raw, nil
}

// referenceDecode is Decode as it was: json.Unmarshal, then the Storable
// check.
func referenceDecode(raw []byte) (*Response, error) {
	var r Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if !Storable(r.StatusCode) {
		return nil, fmt.Errorf("stored status code %d", r.StatusCode)
	}
	return &r, nil
}

// referenceStored is Filter.Stored as it was: every name lower-cased with
// strings.ToLower, the Connection-listed set always built.
func referenceStored(f *Filter, r *Response) Response {
	listed := map[string]bool{} // API Gateway merges both header maps
	var connection []string
	for k, v := range r.Headers {
		if strings.EqualFold(k, "Connection") {
			connection = append(connection, v)
		}
	}
	for k, vs := range r.MultiValueHeaders {
		if strings.EqualFold(k, "Connection") {
			connection = append(connection, vs...)
		}
	}
	for _, v := range connection {
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
