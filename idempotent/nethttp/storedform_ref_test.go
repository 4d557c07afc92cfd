package nethttp

// The first implementation of headerFilter.Stored, kept as the reference the
// hand-written one must equal (storedform_test.go).

import (
	"strings"
)

// referenceStored is headerFilter.Stored as it was: every name lower-cased with
// strings.ToLower, the Connection-listed set always built.
func referenceStored(f *headerFilter, r *storedResponse) storedResponse {
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
	s := storedResponse{StatusCode: r.StatusCode, Body: asSent(r.Body), IsBase64Encoded: r.IsBase64Encoded}
	for k, v := range r.Headers {
		if keep(k) {
			if s.Headers == nil {
				s.Headers = make(map[string]string, len(r.Headers))
			}
			s.Headers[asSent(k)] = asSent(v)
		}
	}
	for k, v := range r.MultiValueHeaders {
		if keep(k) {
			if s.MultiValueHeaders == nil {
				s.MultiValueHeaders = make(map[string][]string, len(r.MultiValueHeaders))
			}
			vs := make([]string, len(v))
			for i := range v {
				vs[i] = asSent(v[i])
			}
			s.MultiValueHeaders[asSent(k)] = vs
		}
	}
	if f.replayCookies && r.Cookies != nil {
		s.Cookies = make([]string, len(r.Cookies))
		for i := range r.Cookies {
			s.Cookies[i] = asSent(r.Cookies[i])
		}
	}
	return s
}
