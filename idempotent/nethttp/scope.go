package nethttp

import (
	"context"
	"net/http"
)

// scopeKey is the context key of a request's caller, as ContextWithScope
// or ContextWithScopeError put it: a string (the scope) or an error.
type scopeKey struct{}

// ContextWithScope returns a copy of ctx that names the caller of the
// request whose context it becomes: Middleware scopes that request's key to
// scope, so two callers that send the same key never see each other's
// responses. It is how whatever runs before the middleware and knows the
// caller hands it forward, with nothing called back: an authentication
// middleware, or a front door such as package apigateway's HandlerV1 and
// HandlerV2, which name the API Gateway authorizer's caller here. The last
// ContextWithScope or ContextWithScopeError on ctx counts. A Middleware
// given WithScope names callers with its function instead, and reads
// neither.
func ContextWithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ContextWithScopeError returns a copy of ctx that says why the caller of
// the request whose context it becomes cannot be named: Middleware answers
// that request, if it carries an Idempotency-Key, 500 internal-error without
// running the handler, and logs err at error level (to the Engine's logger),
// as it does an error of WithScope's function; a request without a key runs,
// as it needs no scope. Sharing one scope across callers is never the
// fallback. Precedence is ContextWithScope's. A nil err panics.
func ContextWithScopeError(ctx context.Context, err error) context.Context {
	if err == nil {
		panic("nethttp: ContextWithScopeError: nil error")
	}
	return context.WithValue(ctx, scopeKey{}, err)
}

// scopeOf names the caller of r, a request with a key: by WithScope's
// function, else by what its context carries (ContextWithScope,
// ContextWithScopeError), else none: every caller in one key space.
func (m *middleware) scopeOf(r *http.Request) (string, error) {
	if m.scope != nil {
		return m.scope(r)
	}
	switch v := r.Context().Value(scopeKey{}).(type) {
	case string:
		return v, nil
	case error:
		return "", v
	}
	return "", nil
}
