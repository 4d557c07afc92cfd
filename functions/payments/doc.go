// Package payments is the sample payments API: POST /payments behind an API
// Gateway HTTP API (payload format 2.0), made idempotent by its
// Idempotency-Key header with [apigateway.WrapV2] over any
// [storage.Store] (DynamoDB in the deployed stack). Its main package,
// cmd/bootstrap, is what the stack deploys.
//
// # The request
//
//	POST /payments
//	Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324
//	Content-Type: application/json
//
//	{"customerId": "cus_NffrFeUfNV2Hib", "amount": 2500, "currency": "EUR"}
//
// The body is validated strictly (see [ParseRequest]): exactly these three
// fields, each once; amount an integer number of minor units from 1 to
// [MaxAmount] (12.5, 12.0 and "12" are refused); currency three upper-case
// letters; customerId 1 to [MaxCustomerIDLength] bytes. Unknown fields are
// refused rather than ignored, so a misspelt field cannot silently charge
// the wrong thing. A refused body is answered 400 with an
// application/problem+json body whose "invalid-params" member lists every
// fault; a body not sent as application/json is answered 415.
//
// # The answers
//
//	201  {"paymentId":"pay_…","customerId":…,"amount":…,"currency":…,"status":"captured"},
//	     Location: /payments/pay_…
//	201  the same answer again, with Idempotent-Replayed: true, for a retry
//	400  invalid body (stored and replayed, like every 4xx except 408/409/425/429:
//	     a retry with the same key and body gets the same 400, and the corrected
//	     body needs a new key, or it is answered 422)
//	     missing or malformed Idempotency-Key, invalid JSON (from the adapter, not stored)
//	409  the same key is still being processed (Retry-After)
//	422  the same key was used with another body
//	500  the ledger write failed; the key is released, so a retry runs again
//	503  the idempotency store is unavailable; nothing ran
//
// Unlike Stripe, which stores no result for a request that fails validation,
// this sample keeps the adapter's rule (every final 4xx is stored): the
// answer to a key never changes while its record lives.
//
// # The side effect
//
// Each executed request writes one item to the ledger table (see
// [LedgerItem]) with a conditional PutItem. Its paymentId and processorKey
// both come from [idempotent.DownstreamKey], the same for every run of one
// Idempotency-Key and caller: the handler runs again after a takeover (a
// crash, by design) or after a write whose outcome was unknown (the key is
// released and the client retries), and that run's write finds the payment
// already recorded and answers with it. Idempotent is not exactly-once; the
// side effect is made so by keying it on the downstream key, as a card
// processor does with the Idempotency-Key it receives. Keys are scoped to the
// caller (the JWT subject), so two callers sending the same key get two
// payments and never each other's answer. After the key's record expires
// (Expiry), the same request finds its payment again, and a different one
// under the same key is refused (422, [ProblemKeyReused]).
//
// The handler returned by [New] is safe for concurrent use.
package payments
