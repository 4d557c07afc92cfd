// Package nethttp makes net/http handlers idempotent with the semantics of
// the IETF Idempotency-Key header draft (draft-ietf-httpapi-idempotency-key-header):
// a client sends a unique key with an unsafe request, and a retry with the
// same key gets the first response again instead of repeating the side
// effect. It is idemkit's one implementation of these rules, for any Go HTTP server:
// behind a Lambda Function URL (aws-lambda-go's lambdaurl), behind Lambda Web
// Adapter or behind API Gateway (package apigateway's HandlerV1 and
// HandlerV2), or off Lambda altogether.
//
// Middleware has the standard shape, func(http.Handler) http.Handler, and
// works over any [storage.Store]; it is a front door of
// [idempotent.Engine], one engine call per request:
//
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	idem := nethttp.Middleware(idempotent.New(store), nethttp.WithScope(callerOf))
//	mux.Handle("POST /payments", idem(http.HandlerFunc(createPayment)))
//
// The repository's guide to HTTP servers, docs/http-servers.md
// (https://github.com/idemkit/idemkit/blob/main/docs/http-servers.md), shows
// it on routers and on a Lambda Function URL with IAM auth, and says what is
// buffered, what the body limit answers, and how streaming handlers fare.
//
// # Requests and answers
//
// One set of rules for every HTTP front door: package apigateway's door
// translates API Gateway events into requests for this middleware, so its
// answers are these too:
// which methods need a key (POST and PATCH by default, see WithMethods), the
// key's syntax (an RFC 8941 string or a bare token, at most MaxKeyLength
// bytes of printable ASCII), what a duplicate must repeat (method, path as
// called, query with parameters sorted by name, body; a body whose
// Content-Type is JSON compared as canonical JSON), which statuses are
// stored, which headers are left out of the record, and the problem+json
// answers with their types and statuses: see the table in the apigateway
// package documentation ("Answers"), which holds here but for the event
// without an HTTP method, which net/http cannot receive (its door answers it
// with Refuse). Key parsing is ParseKey. Three answers are the middleware's
// own:
//
//	case                                         status  type (https://idemkit.dev/problems/...)
//	request body larger than WithMaxBody         413     request-too-large      ProblemRequestTooLarge
//	request body unreadable (client gone)        400     malformed-request      ProblemMalformedRequest
//	caller not named (WithScope, context error)  500     internal-error         ProblemInternal
//
// A replay carries the stored status code, headers and body byte for byte,
// plus Idempotent-Replayed: true. Left out of the record, and so of replays:
// hop-by-hop headers (Connection and the headers it names, Keep-Alive,
// Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade), Date, trailers, headers
// named with WithVolatileHeaders, Set-Cookie unless WithReplayCookies, and
// headers an outer middleware had set before this one with the values the
// handler left them (the outer middleware sets them again for the
// duplicate). Requests with other methods go straight to the handler,
// untouched.
//
// # The handler's side
//
// The handler gets the request body intact (the middleware reads it once, up
// to WithMaxBody, to fingerprint it) and a context that carries the
// idempotent Invocation: idempotent.FromContext and idempotent.DownstreamKey
// work as under idempotent.Wrap, and the context ends before the record's
// lease does.
//
// Its response is buffered until the record is completed (or released), so a
// client never receives a response its retry would not get back. The
// exceptions pass the response through and are never half-stored:
//
//   - A response body larger than WithMaxBody (default DefaultMaxBody, 6 MiB:
//     Lambda's response limit): from the write that crosses the limit on, the
//     response goes straight to the client, and the record is completed
//     without it; duplicates get 409 response-not-stored.
//   - Flush (http.Flusher, or http.ResponseController's Flush): the handler
//     streams. What is buffered is sent, the rest goes straight to the client,
//     and the record is completed without the response, as above.
//   - A status that is never stored (5xx, 408, 409, 425, 429) releases the
//     record as usual, streamed or not: the retry runs the handler again.
//   - A response smaller than WithMaxBody but too large for the store
//     (DynamoDB and Redis items hold 400 KB) reaches its client whole; the
//     record is completed without it (409 response-not-stored for
//     duplicates), as in every front door.
//
// The handler's writer does not offer http.Hijacker (the bytes of a hijacked
// connection could be neither stored nor replayed): http.ResponseController's
// Hijack answers http.ErrNotSupported. Its SetReadDeadline and
// SetWriteDeadline reach the real writer. Informational (1xx) statuses are
// dropped.
//
// A handler that returns after its context ended (its client hung up, or
// the lease's deadline came) having written neither a status nor a body did
// not answer: that is a handler error, ErrNoResponse, and the retry runs the
// handler again instead of replaying an empty 200. A status or body written
// before it returned is its response, stored as any other. The rule, with
// its edges, is in docs/http-servers.md, "When the client hangs up"
// (https://github.com/idemkit/idemkit/blob/main/docs/http-servers.md#when-the-client-hangs-up).
//
// A handler that fails calls Fail (a handler that returns errors, such as
// apigateway's typed ones, fails this way): the record is released, or
// suspended when it holds steps, the outcome's error is the handler's, and
// the client gets 500 internal-error, so a retry runs it again. A handler
// that panics fails the same way (logged at error level with the stack); a panic
// with http.ErrAbortHandler, or any panic after the response began to pass
// through, aborts the response as net/http does. Requests without
// idempotency (another method, no key under idempotent.WithOptionalKey,
// IDEMKIT_DISABLED) run the handler on the real writer, as if the
// middleware were not there.
//
// # Caller scoping
//
// Unscoped, every caller shares one key space, and a caller who learns
// another's key and body could replay that caller's response. When requests
// are authenticated, name the caller: with WithScope, reading what your
// authentication middleware (run before this one) put in the context, or
// behind a Function URL with IAM auth, the signed caller that
// lambdaurl.RequestFromContext carries; or have what runs before the
// middleware hand the caller forward with ContextWithScope (or say why it
// cannot, with ContextWithScopeError), as package apigateway's HandlerV1 and
// HandlerV2 do with the authorizer's caller. WithScope wins over the
// context.
//
// # Options
//
// The core is configured once, by the options given to idempotent.New
// (prefix, expiry, leases, waiting, cache, logger, outcome hooks, optional
// keys), and every front door given that Engine shares them; the
// middleware's own lines (a handler panic, a WithScope error) go to the
// Engine's logger too. This package's options are its own: the methods that
// need a key, Retry-After, the headers and cookies stored, the body limit
// and the caller's scope. The middleware derives the key, scope and payload
// from each request itself, and stores its own response form as JSON:
// idempotent.WithCodec does not apply to it.
//
// # Guarantees
//
// Those of the idempotent package: while a record lives (one hour by
// default, see idempotent.WithExpiry), a duplicate never re-runs the
// handler, except after a takeover of an invocation that crashed or overran
// its lease. Idempotent is not exactly-once; pass idempotent.DownstreamKey to
// payment providers and other external APIs. A server without a request
// deadline holds a record's lease for idempotent.WithMaxLease (15 minutes by
// default): a request whose process dies is retried after that.
//
// The middleware and the handlers it returns are safe for concurrent use.
package nethttp
