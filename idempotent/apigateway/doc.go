// Package apigateway makes Amazon API Gateway Lambda handlers idempotent with
// the semantics of the IETF Idempotency-Key header draft
// (draft-ietf-httpapi-idempotency-key-header) and of Stripe's API: a client
// sends a unique key with an unsafe request, and a retry with the same key
// gets the first response again instead of repeating the side effect.
//
// The door has lambdaurl's shape (aws-lambda-go's, for Function URLs):
// HandlerV1 serves REST API (payload format 1.0) events and HandlerV2 HTTP
// API (payload format 2.0) events with an http.Handler, translating each
// event into an *http.Request (method, path, query, headers, cookies, body
// decoded from base64; the event itself in its context, for
// RequestV1FromContext and RequestV2FromContext) and what the handler writes
// back into the event response. Any net/http handler or middleware runs
// behind API Gateway unchanged; idempotency is package nethttp's
// middleware around it, with keys scoped to the authorizer's caller, whom
// the door names in each request's context (see "Caller scoping"):
//
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
//	idem := nethttp.Middleware(idempotent.New(store))
//	lambda.Start(apigateway.HandlerV2(idem(mux)))
//
// WrapV1 and WrapV2 keep the typed form, a handler of the event itself: each
// is the door around nethttp.Middleware around an http.Handler that calls
// the typed handler with the event and writes its response. So the HTTP
// rules below (keys, fingerprints, stored statuses and headers, problem
// answers, handler failures) are package nethttp's, one implementation, and
// its options (nethttp.WithMethods, nethttp.WithRetryAfter, ...) are
// WrapV1's and WrapV2's, given with WithHTTPOptions:
//
//	engine := idempotent.New(store, idempotent.WithExpiry(24*time.Hour))
//	lambda.Start(apigateway.WrapV2(engine, createPayment))
//
// # Requests
//
// Requests whose method is POST or PATCH (see nethttp.WithMethods) must carry an
// Idempotency-Key header (unless the Engine was made with
// idempotent.WithOptionalKey: a request without the header then runs without
// idempotency); other methods go straight to the handler. Header names are matched case-insensitively. The key is either
// the draft's RFC 8941 string ("8e03978e-40d5", with \" and \\ escaped) or a
// bare token (8e03978e-40d5), the same key either way: at most nethttp.MaxKeyLength
// bytes of printable ASCII (a bare key: visible ASCII without commas). An
// empty, overlong, non-ASCII, badly quoted or repeated key is refused.
//
// A duplicate must repeat the request: its method, its path as called
// (RawPath for payload 2.0, Path for 1.0), its query string (parameters
// sorted by name, the order of a name's values kept) and its body (decoded
// first when base64-encoded). A body whose Content-Type is application/json or
// a +json type is compared as canonical JSON: key order and white space do not
// count, numbers count as written (so values beyond 2^53 never collide), and a
// duplicate object key or invalid JSON is refused. Any other body is compared
// byte for byte, even if it happens to parse as JSON: without a declared type
// the adapter cannot know that white space carries no meaning (a signed
// webhook body, say), and comparing exactly can only refuse a retry, never
// replay a response to a different request.
//
// # Answers
//
// The wrapped function never returns a Go error (API Gateway would answer a
// bare 502): every failure is an application/problem+json (RFC 9457) response
// with a stable type URI, exported as package nethttp's Problem constants
// (one vocabulary for both HTTP front doors).
//
//	case                                         status  type (https://idemkit.dev/problems/...)
//	first request                                handler's response
//	duplicate of a stored response               stored response + Idempotent-Replayed: true
//	method not idempotent (GET, PUT, ...)        handler's response
//	event without an HTTP method                 400     malformed-request      ProblemMalformedRequest
//	Idempotency-Key missing                      400     missing-key            ProblemMissingKey
//	Idempotency-Key malformed                    400     invalid-key            ProblemInvalidKey
//	JSON body invalid or with a duplicate key    400     invalid-json           ProblemInvalidJSON
//	same key, first request still running        409     in-progress            ProblemInProgress (Retry-After)
//	same key, response too large to keep         409     response-not-stored    ProblemResponseNotStored
//	same key, different request                  422     payload-mismatch       ProblemPayloadMismatch
//	handler error or panic                       500     internal-error         ProblemInternal
//	handler's own writes could not commit        409     transaction-aborted    ProblemTxAborted
//	database refused the handler's writes        500     transaction-refused    ProblemTxRefused
//	stored record corrupt or of a newer format   500     corrupt-record         ProblemCorruptRecord
//	idempotency store unavailable                503     store-unavailable      ProblemStoreUnavailable (Retry-After)
//
// An event without an HTTP method is not an API Gateway proxy request of the
// payload format version the function was wrapped for (a 2.0 event given to
// WrapV1 or HandlerV1 has none, and the reverse): whether it needs a key
// cannot be told, so it is refused, logged at error level, and the handler
// does not run.
//
// The typed handler of WrapV1 and WrapV2 gets the original event; the
// response it returns reaches its client unchanged (the event response it
// returned, not a translation of it). Its error or panic is answered with
// nethttp.Fail: 500 internal-error, the record released, the error the
// outcome's (a panic's value, when an error, stays matchable with
// errors.Is). Behind HandlerV1 and HandlerV2, an http.Handler fails the
// same way with nethttp.Fail, or by panicking.
//
// Retry-After defaults to one second (see nethttp.WithRetryAfter). A key reused for a
// different request gets 422 whether the first request has finished or is
// still running, and never sees the first request's response. When the first
// response was too large for the store (DynamoDB items hold 400 KB; Lambda
// responses reach 6 MB), the request has run and its response is lost to
// duplicates: they get 409, not 410, because the condition belongs to the key
// rather than to the resource (which is not gone), and because 410 may be
// cached by intermediaries; the missing Retry-After and the distinct type tell
// it from the in-progress 409.
//
// # What is stored
//
// Responses with a status from 200 to 499 are stored and replayed, except 408,
// 409, 425 and 429, which are transient. Those, any other status (5xx, 1xx,
// an invalid one), a handler error and a handler panic are not stored: the
// record is released, the client gets the response (a 500 problem for an
// error or panic, without internal details), and its retry runs the handler
// again.
//
// A replay carries the stored status code, headers (Content-Type included)
// and body byte for byte as the client received them, plus
// Idempotent-Replayed: true: a header with one value in Headers, with more in
// MultiValueHeaders, cookies (when replayed) in Cookies for payload 2.0, and
// the body base64-encoded (IsBase64Encoded) when it is not valid UTF-8.
// Content-Length is left to API Gateway. The record holds the response in
// the form package nethttp stores. Left
// out of the record, and so of replays, are hop-by-hop headers (Connection and
// the headers it names, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
// Upgrade), Date, headers named with nethttp.WithVolatileHeaders and cookies (the
// Set-Cookie header of either payload version and the Cookies of payload
// 2.0). Cookies often carry session secrets, which should neither sit in the
// store nor be handed to whoever presents the same key and body; nethttp.WithReplayCookies
// stores and replays them for handlers whose cookies are safe to repeat. The
// first response always reaches its client unchanged.
//
// # Caller scoping
//
// Keys are scoped to the authenticated caller, so two callers that use the
// same key never see each other's responses, and an unauthenticated request
// never replays an authenticated caller's response. The caller is, for
// payload 2.0, the JWT authorizer's issuer and subject (client_id when there
// is no subject), the IAM caller (its Cognito identity, else its user ARN,
// else account and caller id) or a Lambda authorizer's principalId; for
// payload 1.0, the Cognito user pool authorizer's issuer and subject claims, a
// Lambda authorizer's principalId, the Cognito identity, the IAM user ARN
// (else account and caller id) or the API key id. Requests with none of these
// share one anonymous scope. An HTTP API Lambda authorizer with simple
// responses passes no principalId, only its context: name the context field
// that identifies the caller with WithAuthorizerCaller (without it, such
// requests share the anonymous scope, and the adapter logs a warning once,
// for the first such request with an Idempotency-Key).
//
// Every door applies this rule, with nothing called back: it names the
// caller while it translates the event, and hands the name forward to
// nethttp.Middleware in the request's context (nethttp.ContextWithScope; a
// caller WithAuthorizerCaller cannot name, with nethttp.ContextWithScopeError,
// which the middleware answers 500 for a request with a key). So HandlerV1
// and HandlerV2 scope the keys of the middleware behind them as WrapV1 and
// WrapV2 do. WithAuthorizerCaller is an option of every door; a
// nethttp.WithScope given to the middleware (through WithHTTPOptions, for
// WrapV1 and WrapV2) names callers instead of the door.
// An assumed role's ARN includes its session name, so a retry must come from
// the same role session to be recognized.
//
// # Logs and metrics
//
// The core logs each outcome with the hashed record id, never the raw key or
// body; WrapV1 and WrapV2 add an error-level line, with the stack of a
// panic, when a handler fails. Both go to the Engine's logger
// (idempotent.WithLogger). HandlerV1 and HandlerV2, which know no Engine,
// log what they refuse or recover, and the shared-scope warning, to
// slog.Default(); the middleware behind them logs to its Engine's.
// Give the Engine idempotent.WithOutcomeHook for metrics; a response not
// stored because of its status is reported as idempotent.OutcomeHandlerError,
// as it releases the record the same way. Requests the adapter refuses with
// 400 (a malformed key, an invalid JSON body, an event without a method) are
// reported as idempotent.OutcomeRejected, with idempotent.ErrInvalidKey or
// idempotent.ErrInvalidPayload, and so is a request answered 500 because
// WithAuthorizerCaller's field is missing (with idempotent.ErrInvalidKey); a
// stored response of a status the adapter never stores is
// idempotent.ErrCorruptRecord, also OutcomeRejected.
//
// # Options
//
// The core is configured once, by the options given to idempotent.New
// (prefix, expiry, leases, waiting, cache, logger, outcome hooks, optional
// keys), and every front door given that Engine shares them. The HTTP
// options are package nethttp's, given to nethttp.Middleware, or to WrapV1
// and WrapV2 with WithHTTPOptions: the methods that need a key,
// Retry-After, the headers and cookies stored, the body limit, and a
// caller's scope of its own (nethttp.WithScope). The door's own option,
// for all four, is WithAuthorizerCaller. The middleware derives the key and
// payload from each request itself, and stores the HTTP response form as
// JSON: idempotent.WithCodec does not apply to it.
//
// # Timeouts
//
// API Gateway stops waiting for Lambda after 29 seconds (REST API, by
// default) or 30 seconds (HTTP API) and answers 504, while the function may
// run on until its own timeout, holding the key: retries get 409 until then.
// When the function timeout is longer than the integration timeout, pass
// idempotent.WithMaxLease with the integration timeout: the handler's context
// then ends when API Gateway stops waiting, and so does the lease.
//
// # Guarantees
//
// Those of the idempotent package: while a record lives (one hour by default,
// see idempotent.WithExpiry), a duplicate never re-runs the handler, except
// after a takeover of an invocation that crashed or overran its lease.
// Idempotent is not exactly-once; pass idempotent.DownstreamKey(ctx) to
// payment providers and other external APIs.
//
// The functions HandlerV1, HandlerV2, WrapV1 and WrapV2 return are safe for
// concurrent use.
package apigateway
