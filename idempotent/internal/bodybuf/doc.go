// Package bodybuf is the response body buffer of the HTTP front doors
// (nethttp's capture, apigateway's recorder): a strings.Builder that keeps a
// body written in one string as that string, without a copy. Most handlers
// write their body in one call, and each copy of it was an allocation and a
// memmove on every request (issue 35 bounds the front doors' instructions
// per request).
package bodybuf
