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
//	409  the same key is still being processed (Retry-After), or this run lost its
//	     lease before its row committed (the new owner's answer follows); 409
//	     transaction-aborted: the ledger holds another charge under the payment ID
//	422  the same key was used with another body
//	500  the charge or the ledger write failed; the key is given back (kept with
//	     its recorded charge), so a retry runs again without charging twice
//	503  the idempotency store is unavailable: nothing ran, or the transaction's
//	     outcome is unknown (the key is left to its lease; a retry replays or resumes)
//
// Unlike Stripe, which stores no result for a request that fails validation,
// this sample keeps the adapter's rule (every final 4xx is stored): the
// answer to a key never changes while its record lives.
//
// # The side effect
//
// Each executed request charges the customer through a [Processor] and
// records the payment in the ledger table (see [LedgerItem]).
//
// The charge is a step ([idempotent.Step], named [ChargeStep]): the processor
// gets the step's own downstream key as its idempotency key, and the charge
// is recorded in the idempotency record. A run that resumes the record, after
// a crash, a lost lease or a failure after the charge (the key is then kept
// with its steps, and the client's retry resumes), gets the charge from the
// record and does not call the processor again; a crash between the charge
// and its record repeats the call with the same key, which the processor
// answers with the same charge. A processor that refuses the key (it charged
// other parameters under it: the key was reused after its record expired)
// is answered 422 ([ProblemKeyReused]).
//
// The ledger row is a conditional Put added to the completion's transaction
// ([dynamostore.Transaction]): the row and the record's completion commit in
// one TransactWriteItems, fenced on the run's lease, or neither does. So a
// run whose lease was taken over commits no row and its caller gets 409, as
// a retry would; a run that dies before completing leaves no row; the run
// that completes leaves exactly one. What becomes exactly-once is the writes
// to DynamoDB while the record lives; the charge, a call to another system,
// is made safe by its key. Over a store without transactions (the memory
// store of tests) the row is a PutItem of its own, made safe by its
// condition. Its paymentId comes from [idempotent.DownstreamKey], the same
// for every run of one Idempotency-Key and caller, and the Put's condition
// accepts only a new payment or the same charge again, so the same request
// after the record expired finds its payment. Keys are scoped to the caller
// (the JWT subject), so two callers sending the same key get two payments
// and never each other's answer.
//
// The handler returned by [New] is safe for concurrent use.
package payments
