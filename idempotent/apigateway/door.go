package apigateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/httprules"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// door is what WrapV1 and WrapV2 share: a translation between API Gateway
// events and net/http around the middleware of package nethttp, the one
// HTTP front door, as aws-lambda-go's lambdaurl translates Function URL
// events. An event becomes an *http.Request whose context carries the
// invocation (the event, and the handler's response once it has one); the
// middleware parses the key, names the caller (scope, from the event's
// authorizer), fingerprints the request, makes the one call of the Engine and
// answers problems, replays and the handler's panics and errors; the
// http.Handler it wraps (door.ServeHTTP) calls the typed handler with the
// event and writes its response, translated, for the record. What the
// middleware answers is translated back into the event response, except
// the handler's own response, which its client gets unchanged.
type door[Req, Resp any] struct {
	payload[Req, Resp]
	core        *idempotent.Engine
	handler     func(context.Context, Req) (Resp, error)
	callerField string       // WithAuthorizerCaller
	mw          http.Handler // the middleware, around this door's ServeHTTP

	sharedScopeWarning sync.Once // see scope
}

// payload is one payload format version's translations.
type payload[Req, Resp any] struct {
	// request is the event as an HTTP request, with ctx; errNoMethod if
	// the event has no method.
	request func(ctx context.Context, ev *Req) (*http.Request, error)
	// write writes the handler's response to w, for the record.
	write func(w http.ResponseWriter, out *Resp)
	// response is an answer of the middleware (a problem, a replay) as the
	// event response.
	response func(rec *recorder) Resp
	// caller names the caller (see principal), and returns the context of
	// the Lambda authorizer that authorized the request, nil if none did.
	caller func(ev *Req) (scope string, lambdaAuth map[string]any)
}

func newDoor[Req, Resp any](core *idempotent.Engine, handler func(context.Context, Req) (Resp, error), p payload[Req, Resp], opts []Option) *door[Req, Resp] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d := &door[Req, Resp]{payload: p, core: core, handler: handler, callerField: o.callerField}
	own := nethttp.Option(func(c *httprules.Config) {
		c.Name = "apigateway"
		c.Scope = d.scope
	})
	d.mw = nethttp.Middleware(core, append(slices.Clip(o.http), own)...)(d)
	return d
}

// invocation is one event on its way through the middleware, carried by the
// request's context.
type invocation[Req, Resp any] struct {
	ev      Req  // the event, copied here: one allocation for both
	out     Resp // the handler's response, once done
	running bool // the handler is running: a panic now is its own
	done    bool // the handler returned a response and no error: out is its client's answer

	rec recorder // what the middleware answers
}

type invocationKey struct{}

// serve answers one event. It never panics and never fails: every outcome
// is an HTTP response.
func (d *door[Req, Resp]) serve(ctx context.Context, ev Req) (out Resp) {
	inv := &invocation[Req, Resp]{ev: ev}
	defer func() {
		// What net/http's server does for its handlers, Lambda does not: a
		// panic that leaves the middleware (the handler's, on a request
		// without idempotency; a fault in the store) is answered here.
		if v := recover(); v != nil {
			out = d.recovered(ctx, inv, v)
		}
	}()
	r, err := d.request(context.WithValue(ctx, invocationKey{}, inv), &inv.ev)
	if err != nil {
		d.core.Logger().LogAttrs(ctx, slog.LevelError, "apigateway: event without an HTTP method; the handler did not run "+
			"(is the function wrapped for the other payload format version, or invoked with another kind of event?)")
		p, why := httprules.Refusal(err)
		_ = d.core.Reject(ctx, idempotent.Call{}, why)
		return d.response(problem(p))
	}
	d.mw.ServeHTTP(&inv.rec, r)
	if inv.done && inv.rec.delivered {
		// The handler's response, unchanged, whatever happened to the
		// record; but not when the middleware answered a failure instead
		// (the run's transaction did not commit).
		return inv.out
	}
	return d.response(&inv.rec)
}

// ServeHTTP is the http.Handler the middleware wraps: it runs the typed
// handler with the event and writes its response for the record. A
// handler error is raised as a httprules.HandlerError, which the
// middleware recovers as it recovers panics.
func (d *door[Req, Resp]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inv := r.Context().Value(invocationKey{}).(*invocation[Req, Resp])
	inv.running = true
	out, err := d.handler(r.Context(), inv.ev)
	inv.running = false
	if err != nil {
		panic(&httprules.HandlerError{Err: err})
	}
	inv.out, inv.done, inv.rec.answered = out, true, true
	d.write(w, &inv.out)
}

// recovered answers an event whose panic left the middleware: the handler's
// response if it had one (the store failed after it), else a 500 problem.
func (d *door[Req, Resp]) recovered(ctx context.Context, inv *invocation[Req, Resp], v any) Resp {
	log := d.core.Logger()
	switch he, ok := v.(*httprules.HandlerError); {
	case ok:
		log.LogAttrs(ctx, slog.LevelError, "apigateway: handler failed", slog.String("error", he.Err.Error()))
	case inv.running:
		log.LogAttrs(ctx, slog.LevelError, "apigateway: handler failed",
			slog.String("error", (&httprules.PanicError{Value: v}).Error()), slog.String("stack", string(debug.Stack())))
	default:
		log.LogAttrs(ctx, slog.LevelError, "apigateway: recovered panic",
			slog.String("error", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
	}
	if inv.done {
		return inv.out
	}
	return d.response(problem(httprules.Internal()))
}

// scope names the caller of a request with a key (the middleware's
// httprules.Config.Scope): the one payload's caller names, or under
// WithAuthorizerCaller the field of a Lambda authorizer's context (an error
// when the field is missing). A request a Lambda authorizer authorized
// without a principalId is in the anonymous scope, which is logged once as a
// warning: it usually means an authorizer with simple responses.
func (d *door[Req, Resp]) scope(r *http.Request) (string, error) {
	inv := r.Context().Value(invocationKey{}).(*invocation[Req, Resp])
	scope, lambdaAuth := d.caller(&inv.ev)
	if lambdaAuth == nil {
		return scope, nil
	}
	if field := d.callerField; field != "" {
		kind, v, ok := scalarString(lambdaAuth[field])
		if !ok {
			return "", fmt.Errorf("the Lambda authorizer's context has no usable %q field (WithAuthorizerCaller): "+
				"want a non-empty string, an integer of magnitude below 2^53 or a boolean", field)
		}
		return principal(callerLambdaCtx, field, kind, v), nil
	}
	if scope == anonymous {
		d.sharedScopeWarning.Do(func() {
			d.core.Logger().LogAttrs(r.Context(), slog.LevelWarn, "apigateway: a Lambda authorizer passed no principalId, so its callers share "+
				"one idempotency scope; name the context field that identifies them with apigateway.WithAuthorizerCaller")
		})
	}
	return scope, nil
}

// errNoMethod refuses an event without an HTTP method: not an API Gateway
// proxy request of the payload version the handler was wrapped for (a
// payload 2.0 event given to WrapV1 has none, and the reverse), so whether
// it needs an Idempotency-Key cannot be told.
var errNoMethod = &httprules.RequestError{Reason: "the event carries no HTTP method: it is not an API Gateway proxy request of the payload format version this function expects"}

// newRequest is the HTTP request of an event: path as called (its escaped
// form, for the fingerprint, is path itself when path is a valid escaped
// path), raw query, header, body (decoded when base64; a body that does not
// decode, which API Gateway never sends, is taken as it is, and the handler
// decides what to answer), with ctx.
func newRequest(ctx context.Context, method, path, query string, header http.Header, body string, b64 bool) *http.Request {
	u := &url.URL{Path: path, RawQuery: query}
	if p, err := url.PathUnescape(path); err == nil && p != path {
		u.Path, u.RawPath = p, path
	}
	// A value, which WithContext copies: one Request on the heap, not two.
	r := http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Body: http.NoBody}
	if b64 {
		if dec, err := base64.StdEncoding.DecodeString(body); err == nil {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(dec)), int64(len(dec))
			return r.WithContext(ctx)
		}
	}
	if body != "" {
		sb := new(stringBody)
		sb.Reset(body)
		r.Body, r.ContentLength = sb, int64(len(body))
	}
	return r.WithContext(ctx)
}

// stringBody is an event's body as a request's: io.NopCloser's, in one
// allocation fewer.
type stringBody struct{ strings.Reader }

// Close does nothing.
func (*stringBody) Close() error { return nil }

// addSingle adds an event's single-value headers to h under their
// canonical names, none of which h holds yet.
func addSingle(h http.Header, m map[string]string) {
	before := len(h)
	values := make([]string, len(m)) // one slice for all values, each header's a capped part
	i := 0
	for k, v := range m {
		values[i] = v
		h[canonicalKey(k)] = values[i : i+1 : i+1]
		i++
	}
	if len(h)-before < len(m) { // two names with one canonical form: set in the map's order, set again in theirs
		mergeSorted(h, m, func(v string) []string { return []string{v} })
	}
}

// canonicalKey is http.CanonicalHeaderKey(name), without allocating for
// the lower-case names API Gateway (payload 2.0) sends most often, which
// net/http does not intern itself (it does Content-Type, User-Agent, ...).
func canonicalKey(name string) string {
	if ck, ok := apiGatewayHeaders[name]; ok {
		return ck
	}
	return http.CanonicalHeaderKey(name)
}

// apiGatewayHeaders maps frequent header names, as payload 2.0 events hold
// them, to their canonical form.
var apiGatewayHeaders = func() map[string]string {
	m := map[string]string{}
	for _, ck := range []string{nethttp.HeaderIdempotencyKey, "Authorization", "X-Amzn-Trace-Id", "X-Forwarded-Port", "X-Forwarded-Proto",
		"X-Forwarded-For", "Content-Type", "Content-Length", "Accept", "Accept-Encoding", "Host", "User-Agent", "Origin", "Referer",
		"X-Request-Id", "X-Api-Key", "X-Amz-Date", "X-Amz-Security-Token", "Cookie", "Traceparent", "Tracestate"} {
		m[strings.ToLower(ck)] = ck
	}
	return m
}()

// addMulti adds an event's multi-value headers to h under their canonical
// names, none of which h holds yet.
func addMulti(h http.Header, m map[string][]string) {
	clash := false
	for k, vs := range m {
		ck := http.CanonicalHeaderKey(k)
		if _, ok := h[ck]; ok {
			clash = true
			continue
		}
		h[ck] = vs
	}
	if clash {
		mergeSorted(h, m, func(vs []string) []string { return vs })
	}
}

// mergeSorted gives each canonical name that two names of m share (names
// differing only in case, possible in hand-written events) the values of
// those names in their sorted order, so the result never depends on the
// map's order.
func mergeSorted[V any](h http.Header, m map[string]V, values func(V) []string) {
	names := make(map[string][]string, len(m)) // by canonical name
	for k := range m {
		ck := http.CanonicalHeaderKey(k)
		names[ck] = append(names[ck], k)
	}
	for ck, ks := range names {
		if len(ks) < 2 {
			continue
		}
		slices.Sort(ks)
		var vs []string
		for _, k := range ks {
			vs = append(vs, values(m[k])...)
		}
		h[ck] = vs
	}
}

// writeResponse writes an event response to w: its headers (the
// multi-value ones win, as API Gateway merges them), cookies as Set-Cookie,
// status and body, decoded when base64. Strings are as the client received
// them through the Lambda runtime's JSON (httprules.AsSent). A status no HTTP
// response can have (below 200, above 999) or a base64 body that does not
// decode makes API Gateway answer 502: a 502 is written, which is not
// stored, and the client gets the handler's response as it is.
func writeResponse(w http.ResponseWriter, status int, single map[string]string, multi map[string][]string, cookies []string, body string, b64 bool) {
	var decoded []byte
	if b64 {
		var err error
		if decoded, err = base64.StdEncoding.DecodeString(body); err != nil {
			status = 0
		}
	}
	if status < 200 || status > 999 {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	h := w.Header()
	values := make([]string, len(single)) // one slice for all single values
	i := 0
	for k, v := range single {
		if _, ok := multi[k]; !ok {
			values[i] = httprules.AsSent(v)
			h[httprules.AsSent(k)] = values[i : i+1 : i+1]
			i++
		}
	}
	for k, vs := range multi {
		h[httprules.AsSent(k)] = asSent(vs)
	}
	if len(cookies) > 0 {
		h["Set-Cookie"] = append(slices.Clip(h["Set-Cookie"]), asSent(cookies)...)
	}
	w.WriteHeader(status)
	if b64 {
		_, _ = w.Write(decoded)
	} else if body != "" {
		_, _ = io.WriteString(w, httprules.AsSent(body))
	}
}

// asSent is vs, each as httprules.AsSent gives it: vs itself when it is
// all valid UTF-8.
func asSent(vs []string) []string {
	for i, v := range vs {
		if !utf8.ValidString(v) {
			out := slices.Clone(vs)
			for j := i; j < len(out); j++ {
				out[j] = httprules.AsSent(out[j])
			}
			return out
		}
	}
	return vs
}

// recorder is the http.ResponseWriter the middleware answers to: what it
// writes (a problem, a replay, the handler's response on its way to its
// client) is kept, for the event response.
type recorder struct {
	header    http.Header
	status    int
	body      strings.Builder
	delivered bool // the middleware passed the handler's response on
	answered  bool // the typed handler returned its response: once delivered, the event's answer (see serve)
}

// dropped reports whether a write is of the handler's own response on its
// way to its client, who gets the typed response instead: it is not kept.
func (w *recorder) dropped() bool { return w.delivered && w.answered }

// Delivered implements httprules.DeliveryNotee.
func (w *recorder) Delivered() { w.delivered = true }

func (w *recorder) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.dropped() {
		return len(p), nil
	}
	return w.body.Write(p)
}

func (w *recorder) WriteString(s string) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.dropped() {
		return len(s), nil
	}
	return w.body.WriteString(s)
}

// headers splits the recorded header into API Gateway's maps: a header
// with one value in single, with more in multi, and with cookies (payload
// 2.0) Set-Cookie in cookies. Content-Length is left to API Gateway, which
// frames the response itself.
func (w *recorder) headers(withCookies bool) (single map[string]string, multi map[string][]string, cookies []string) {
	for k, vs := range w.header {
		switch {
		case len(vs) == 0 || strings.EqualFold(k, "Content-Length"):
		case withCookies && strings.EqualFold(k, "Set-Cookie"):
			cookies = append(cookies, vs...)
		case len(vs) == 1:
			if single == nil {
				single = make(map[string]string, len(w.header))
			}
			single[k] = vs[0]
		default:
			if multi == nil {
				multi = make(map[string][]string)
			}
			multi[k] = vs
		}
	}
	return single, multi, cookies
}

// bodyOf is the recorded body as an event response's: as it is when it is
// valid UTF-8, else base64.
func (w *recorder) bodyOf() (body string, b64 bool) {
	if s := w.body.String(); utf8.ValidString(s) {
		return s, false
	}
	return base64.StdEncoding.EncodeToString([]byte(w.body.String())), true
}

// problem is p as the middleware writes it.
func problem(p httprules.Problem) *recorder {
	rec := &recorder{header: make(http.Header, 3), status: p.Status}
	for k, v := range p.Headers() {
		rec.header.Set(k, v)
	}
	rec.body.Write(p.Body())
	return rec
}
