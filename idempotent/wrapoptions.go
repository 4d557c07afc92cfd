package idempotent

import "context"

// A WrapOption configures one Wrap: how the handler's input becomes a key, a
// scope and a payload. Its type parameter is the handler's input type, so an
// option for another type does not compile.
type WrapOption[In any] func(*binding[In])

// binding is what WrapOptions set.
type binding[In any] struct {
	key     func(In) (string, error)
	scope   func(context.Context, In) (string, error)
	payload func(In) (any, error)
}

// WithKey sets the function that extracts the idempotency key from the input,
// for example an order id or a header. It replaces the default, the SHA-256 of the
// whole input as JSON. An empty key yields ErrMissingKey (see WithOptionalKey); an error
// yields ErrInvalidKey.
func WithKey[In any](key func(In) (string, error)) WrapOption[In] {
	mustFunc(key == nil, "WithKey")
	return func(b *binding[In]) { b.key = key }
}

// WithScope scopes keys to a caller, such as an authenticated principal, so two
// callers using the same key never see each other's responses.
func WithScope[In any](scope func(ctx context.Context, in In) (string, error)) WrapOption[In] {
	mustFunc(scope == nil, "WithScope")
	return func(b *binding[In]) { b.scope = scope }
}

// WithPayloadValidation sets the part of the input that must be identical for
// a duplicate to be replayed; a duplicate whose payload differs gets
// ErrPayloadMismatch. The returned value is hashed: []byte and string as
// given, json.RawMessage canonicalized, anything else as its JSON.
func WithPayloadValidation[In any](payload func(In) (any, error)) WrapOption[In] {
	mustFunc(payload == nil, "WithPayloadValidation")
	return func(b *binding[In]) { b.payload = payload }
}

// mustFunc panics on a nil function given to an option: a programmer error,
// found at start-up.
func mustFunc(isNil bool, option string) {
	if isNil {
		panic("idempotent: " + option + ": nil function")
	}
}

// A ReplayMarker is a response that wants to know it is a replay: when a
// pointer to Wrap's output type implements it, Wrap calls MarkReplayed on
// every replayed response before returning it (Powertools' response hook).
type ReplayMarker interface {
	MarkReplayed(Replay)
}
