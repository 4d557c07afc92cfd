package nethttp

import (
	"net/http"
	"testing"
)

// benchStoredResponse is a typical stored response, as the net/http
// middleware stores it: 201, its headers in MultiValueHeaders, a small JSON
// body (the one nethttp's BenchmarkMiddleware answers).
func benchStoredResponse() *storedResponse {
	return &storedResponse{
		StatusCode: http.StatusCreated,
		MultiValueHeaders: map[string][]string{
			"Content-Type": {"application/json"},
			"Location":     {"/payments/pay_8e03978e40d5"},
		},
		Body: `{"paymentId":"pay_8e03978e40d5","status":"captured","amount":2500,"currency":"EUR"}`,
	}
}

// BenchmarkEncode encodes the typical response for the record.
func BenchmarkEncode(b *testing.B) {
	r := benchStoredResponse()
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeStored(r)
	}
}

// BenchmarkDecode decodes the typical response's record, as a replay does.
func BenchmarkDecode(b *testing.B) {
	raw := encodeStored(benchStoredResponse())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeStored(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStored filters the typical response with the default filter.
func BenchmarkStored(b *testing.B) {
	r := benchStoredResponse()
	f := newHeaderFilter(nil, false)
	b.ReportAllocs()
	for b.Loop() {
		if s := f.Stored(r); len(s.MultiValueHeaders) != 2 {
			b.Fatalf("stored %d headers", len(s.MultiValueHeaders))
		}
	}
}
