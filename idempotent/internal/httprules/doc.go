// Package httprules holds the HTTP semantics of idemkit's HTTP front door,
// the net/http middleware (package nethttp), through which the API Gateway
// adapter (package apigateway) runs every event, translated to net/http, so
// the two answer every case alike:
//
//   - the Idempotency-Key header: ParseKey (RFC 8941 string or bare token, at
//     most MaxKeyLength bytes of printable ASCII);
//   - the methods that need a key, over the idempotent.Engine the front door
//     is given (New, Config);
//   - the request fingerprint a duplicate must repeat: method, path,
//     canonical query and body, JSON compared canonically (AppendFingerprint);
//   - which statuses are stored (Storable), the stored form of a response
//     and its header filter (Response, Filter);
//   - the problem+json answers, their types and statuses, and the mapping
//     from the core's errors to them (Problem, Failure, Refusal).
//
// The front doors document these rules for users; this package is internal
// and its identifiers carry no promise beyond the module. Everything here is
// safe for concurrent use.
package httprules
