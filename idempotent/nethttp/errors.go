package nethttp

import "errors"

// ErrNoResponse is the handler error (idempotent.OutcomeHandlerError) of a
// keyed request whose handler returned after its context ended (its client
// hung up, or the record's lease was about to end) having written neither a
// status nor a body: net/http's implicit 200 is then no response, so the
// record is released, or suspended when it holds steps, and the retry runs
// the handler again. The outcome's error wraps it and the context's cause
// (context.Canceled, context.DeadlineExceeded). The rule is in
// docs/http-servers.md, "When the client hangs up".
var ErrNoResponse = errors.New("nethttp: the handler returned without a response after its request context ended")
