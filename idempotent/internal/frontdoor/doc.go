// Package frontdoor is what the front doors of this module (idempotent.Wrap's
// siblings nethttp, apigateway and sqsbatch, and httprules under them) need
// of an *idempotent.Engine beyond its exported API: the byte-level call
// (Do), the report of a call refused before it (Reject), the error of work
// that ran but whose response cannot be stored (NotStored), the Engine's
// logger, and whether IDEMKIT_DISABLED was set. It is the engine's plumbing,
// not user API, so it lives here, where only this module can import it.
//
// Why this shape: the Engine's type lives in package idempotent, which must
// not export these methods, and a package it imports cannot name its type.
// So package idempotent registers, in an init function, one function that
// turns an *idempotent.Engine (passed as any) into an [Engine], an interface
// of ordinary methods on an unexported view of the same struct (no copy, no
// allocation). A front door takes *idempotent.Engine, as users see it, and
// calls [Of] once, when it is made. Every program that holds an
// *idempotent.Engine has imported package idempotent, so the registration
// has run before any Of.
//
// The package is safe for concurrent use: Register runs once, in an init
// function, before any call of Of.
package frontdoor
