package nethttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Middleware returns middleware that makes handlers idempotent by the
// Idempotency-Key header of their requests, through e: the first request
// with a key runs the handler, and a retry with the same key gets the first
// response again (see the package documentation); e's store keeps the
// responses, and its settings (prefix, expiry, logger, hooks, optional keys)
// apply. The result has the standard shape, so it plugs into http.ServeMux
// and any router.
//
// Handlers wrapped by one Middleware value share e, so concurrent duplicates
// in this process share one claim; a key reused on another route is a
// different request (422).
//
// Middleware panics if e is nil or an option is invalid; the function it
// returns panics on a nil handler.
func Middleware(e *idempotent.Engine, opts ...Option) func(http.Handler) http.Handler {
	if e == nil {
		panic("nethttp: Middleware: nil Engine")
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	m := newMiddleware(e, o)
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("nethttp: Middleware: nil handler")
		}
		return &handler{m: m, next: next}
	}
}

type handler struct {
	m    *middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	method := strings.ToUpper(r.Method)
	if !m.needsKey[method] {
		h.next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	x := &exchange{h: h, w: w, r: r}
	var call idempotent.Call
	if !m.disabled {
		key, err := ParseKey(r.Header[HeaderIdempotencyKey]) // canonical: Header.Values without canonicalizing it
		if err != nil {
			m.refuse(w, r, call, err)
			return
		}
		// No header is an empty key, the core's to answer: ErrMissingKey, or
		// a run without idempotency under idempotent.WithOptionalKey.
		if key != "" {
			if call.Scope, err = m.scopeOf(r); err != nil {
				m.core.Logger().LogAttrs(ctx, slog.LevelError, "nethttp: cannot name the caller; the handler did not run",
					slog.String("method", method), slog.String("error", err.Error()))
				_ = m.core.Reject(ctx, idempotent.Call{}, fmt.Errorf("%w: scope: %w", idempotent.ErrInvalidKey, err))
				writeProblem(w, internalProblem())
				return
			}
			call.Key = key
			fr := fpRequest{Method: method, Path: r.URL.EscapedPath(), Query: canonicalRawQuery(r.URL.RawQuery),
				ContentType: firstValue(r.Header, "Content-Type")}
			// Room to sort a JSON body's objects for its canonical form.
			if x.body, x.pooled, err = m.readBody(r, fr.FingerprintRoom(), isJSON(fr.ContentType)); err != nil {
				m.refuse(w, r, call, err)
				return
			}
			fr.Body = x.body
			// Into the body's spare capacity: one allocation for both.
			fp, err := appendFingerprint(x.body[len(x.body):], &fr)
			if err != nil {
				m.refuse(w, r, call, err)
				return
			}
			call.Payload = fp // a []byte, hashed as given
			call.Accept = x.accept
			x.keyed = true
		}
	}
	res, err := m.core.Do(ctx, call, x.work)
	if x.keyed {
		// The handler is done with the body: a read after this fails, as a
		// read of net/http's own body after the handler returned does.
		x.reqBody.retire()
		// The core hashed the fingerprint when Do began, and the retired
		// body is read no more: nothing holds the buffer.
		putBodyBuffer(x.body, x.pooled)
	}
	switch {
	case res.Ran && !x.keyed:
		// Run without idempotency: on the real writer, or (with a store
		// that has transactions) through the capture, whose response passed
		// through or was held for the handler's transaction, which committed.
		if x.c.w != nil {
			x.c.deliver()
		}
	case res.Ran:
		x.answerRun(ctx)
	case err != nil:
		// The core refused the call, or the handler's writes did not
		// commit: then its response was held (see txGuard), and is dropped.
		x.c.discardHeld()
		writeProblem(w, failure(err, m.retryAfter))
	case x.stored == nil:
		// The core replays only what accept decoded.
		m.core.Logger().LogAttrs(ctx, slog.LevelError, "nethttp: the core replayed a response that was not decoded")
		writeProblem(w, internalProblem())
	default:
		x.replay()
	}
}

// refuse answers with a 400 (or 413) problem a request the middleware
// refuses itself, before any Do, and reports the refusal to the core, which
// tells the outcome hook and the log (OutcomeRejected).
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, call idempotent.Call, why error) {
	p, err := refusal(why)
	_ = m.core.Reject(r.Context(), call, err)
	writeProblem(w, p)
}

// readBody reads the request body once, up to the limit, into a buffer
// with room to spare after it for the body's fingerprint: room, the body's
// length (the body, or a JSON body's canonical form, in the fingerprint)
// and, with sortRoom, the body's length again (the room canonjson.Append
// takes to sort an object's members). holder is what putBodyBuffer gives
// the buffer back in.
func (m *middleware) readBody(r *http.Request, room int, sortRoom bool) (buf []byte, holder *[]byte, _ error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil, nil
	}
	if r.ContentLength > m.maxBody {
		return nil, nil, &tooLargeError{Limit: m.maxBody}
	}
	// A declared length sizes the buffer, with a byte to spare for the read
	// that finds the end; an undeclared one starts at 512 bytes and grows.
	// One byte past the limit tells a body at the limit from a longer one.
	size := int64(512)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1
	}
	copies := int64(2)
	if sortRoom {
		copies = 3
	}
	buf, holder = bodyBuffer(copies*size + int64(room))
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf)) // (an undeclared or wrong length)
		}
		n, err := r.Body.Read(buf[len(buf):min(int64(cap(buf)), m.maxBody+1)])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > m.maxBody:
			return nil, nil, &tooLargeError{Limit: m.maxBody}
		case err == io.EOF:
			return buf, holder, nil
		case err != nil:
			return nil, nil, m.readError(err)
		}
	}
}

// bodyBuffers are readBody's buffers, once their request is done with them
// (putBodyBuffer): body, fingerprint and sorting room, three times a JSON
// body's length, were half of what a request allocates, and the garbage
// collector's work for them a tenth of the middleware's instructions
// (callgrind: bench's drive -door http). Buffers past maxPooledBody are
// left to the collector, so that a rare large body is not held.
var bodyBuffers sync.Pool // of *[]byte

const maxPooledBody = 64 << 10

// bodyBuffer returns an empty buffer of at least n bytes' capacity, and
// the pool's holder it came in (nil for a new buffer): given back with it,
// the holder saves an allocation per request.
func bodyBuffer(n int64) ([]byte, *[]byte) {
	if n <= maxPooledBody {
		if p, ok := bodyBuffers.Get().(*[]byte); ok && int64(cap(*p)) >= n {
			return (*p)[:0], p
		}
	}
	return make([]byte, 0, n), nil
}

// putBodyBuffer gives buf (from bodyBuffer, maybe grown) back for another
// request, in holder (bodyBuffer's, or nil); nothing may use either after.
func putBodyBuffer(buf []byte, holder *[]byte) {
	if c := cap(buf); c > 0 && c <= maxPooledBody {
		if holder == nil {
			holder = new([]byte)
		}
		*holder = buf[:0]
		bodyBuffers.Put(holder)
	}
}

// readError is the refusal of a request whose body failed to read: 413 past
// an http.MaxBytesReader's limit (an outer middleware's), else 400.
func (m *middleware) readError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &tooLargeError{Limit: min(tooLarge.Limit, m.maxBody)}
	}
	return &requestError{Reason: "the request body could not be read"}
}

// exchange is one request on its way through the core: the work and accept
// the core calls, and what they found.
type exchange struct {
	h     *handler
	w     http.ResponseWriter
	r     *http.Request
	keyed bool   // the call has a key: the core keeps a record of it
	body  []byte // the request body, read once (keyed requests)
	// pooled is the pool's holder of body's buffer (nil for a new one).
	pooled *[]byte

	c        capture         // the handler's writer (keyed requests)
	reqBody  requestBody     // the handler's request body (keyed requests)
	reported bool            // err is the handler's own, reported with Fail
	err      error           // the handler's failure: its panic (*panicError), the error it reported with Fail, or ErrNoResponse
	stored   *storedResponse // the stored response accept decoded, on a replay
	replBody []byte          // its body, decoded from base64 (else it is stored.Body)
}

// work is what the core makes idempotent: it runs the handler and returns
// the response to store, encoded, or an error that makes the core release
// the record: the handler's panic or error, ErrNoResponse, or
// notStoredError. The handler's request carries ctx, with the
// core's Invocation.
func (x *exchange) work(ctx context.Context) ([]byte, error) {
	transactional := x.h.m.core.Transactional()
	if !x.keyed && !transactional {
		// Run on the real writer, without idempotency: nothing to add.
		x.h.next.ServeHTTP(x.w, x.r.WithContext(ctx)) // a panic goes to net/http, as without the middleware
		return nil, nil
	}
	x.c.init(x.w, x.h.m.maxBody)
	rctx := ctx
	if transactional {
		// The handler's writes commit when it returns: the guard holds the
		// response until then (see txGuard).
		x.c.guard.parent = ctx
		rctx = storage.ContextWithTx(ctx, &x.c.guard)
	}
	r := x.r.WithContext(rctx) // one copy of the request
	if !x.keyed {
		// The response passes straight through, unless the handler opens
		// its transaction first: then it is held until the commit.
		x.c.direct = true
		x.h.next.ServeHTTP(&x.c, r) // a panic goes to net/http, as without the middleware
		x.c.settle()
		return nil, nil
	}
	x.reqBody.r.Reset(x.body)
	r.Body = &x.reqBody
	x.run(r)
	c := &x.c
	switch {
	case x.err != nil:
		return nil, x.err
	case c.silent && ctx.Err() != nil:
		// The handler gave up when its context ended (its client hung up, or
		// the lease's deadline came) and answered nothing: net/http's implicit
		// 200 is no response, and storing it would answer every retry with an
		// empty success for work that never ran. A failure: the record is
		// released (or suspended, when it holds steps), so the retry runs.
		x.err = fmt.Errorf("%w: %w", ErrNoResponse, context.Cause(ctx))
		return nil, x.err
	case !storable(c.status):
		return nil, &notStoredError{Status: c.status}
	case c.passed != "":
		// The client has (part of) the response already, and the record
		// cannot hold it: completed without it, so a retry never runs the
		// handler again and gets 409 response-not-stored.
		return nil, x.h.m.core.NotStored(errors.New(c.passed))
	case c.held():
		// Held past the limit for the handler's transaction: the client
		// gets it after the commit; the record cannot hold it.
		return nil, x.h.m.core.NotStored(errors.New(passTooLarge))
	}
	resp := storedResponse{StatusCode: c.status, MultiValueHeaders: c.storedHeader()}
	if b := c.body.String(); utf8.ValidString(b) {
		resp.Body = b
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(b)), true
	}
	// Most responses keep every header, all valid UTF-8: storedWhole checks
	// both in one pass over the header. Else the header is checked here.
	stored, whole := x.h.m.filter.storedWhole(&resp)
	if !whole {
		if !replayable(resp.MultiValueHeaders) {
			// JSON would change bytes that are not UTF-8: a replay would differ.
			return nil, x.h.m.core.NotStored(errors.New("a response header is not valid UTF-8"))
		}
		stored = x.h.m.filter.Stored(&resp)
	}
	return encodeStored(&stored), nil
}

// requestBody gives the handler the body read before it ran: once the
// handler is done, retire makes every later read fail, as net/http's own
// body does (a handler that leaves a goroutine reading its body breaks
// net/http's rules).
type requestBody struct {
	mu      sync.Mutex
	r       bytes.Reader
	retired bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retired {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.Read(p)
}

// WriteTo lets io.Copy skip a buffer, as the body io.NopCloser gave did.
func (b *requestBody) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retired {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.WriteTo(w)
}

// Close does nothing, as io.NopCloser's.
func (*requestBody) Close() error { return nil }

func (b *requestBody) retire() {
	b.mu.Lock()
	b.retired = true
	b.r.Reset(nil)
	b.mu.Unlock()
}

// firstValue is h.Get(name) for a name in canonical form, which Get would
// canonicalize again on every request (issue 35 bounds the middleware's
// instructions per request).
func firstValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// replayable reports whether every header name and value is valid UTF-8, so
// that the stored form gives them back unchanged.
func replayable(h map[string][]string) bool {
	for k, vs := range h {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// run runs the handler once on the capture, recording its panic or the
// failure it reported with Fail.
func (x *exchange) run(r *http.Request) {
	defer func() {
		switch v := recover(); {
		case v != nil:
			x.err = &panicError{value: v, stack: debug.Stack()}
		case x.c.failed != nil:
			x.err, x.reported = x.c.failed, true
		}
		x.c.settle()
	}()
	x.h.next.ServeHTTP(&x.c, r)
}

// answerRun answers a keyed request that ran the handler, once the record
// is settled: with its response, whatever happened to the record, or after
// a panic, a Fail or ErrNoResponse with a 500 problem (a client
// that hung up reads none of it; one whose lease's deadline came learns it
// may retry). A panic after the response began to pass through, or a panic
// with http.ErrAbortHandler, aborts the response as net/http does: the
// client must not take a cut-off response for a whole one.
func (x *exchange) answerRun(ctx context.Context) {
	if x.err == nil {
		x.c.deliver()
		return
	}
	pe, panicked := x.err.(*panicError)               // run's, unwrapped
	if panicked && pe.value == http.ErrAbortHandler { // compared as net/http does
		panic(http.ErrAbortHandler)
	}
	// A failure the handler reported with Fail is the handler's to log.
	if !errors.Is(x.err, ErrNoResponse) && !x.reported {
		attrs := []slog.Attr{slog.String("method", x.r.Method), slog.String("error", x.err.Error())}
		if panicked {
			attrs = append(attrs, slog.String("stack", string(pe.stack)))
		}
		x.h.m.core.Logger().LogAttrs(ctx, slog.LevelError, "nethttp: handler failed", attrs...)
	}
	if panicked && x.c.passed != "" {
		panic(http.ErrAbortHandler)
	}
	x.c.discard()
	writeProblem(x.w, internalProblem())
}

// accept decodes a stored response before the core replays it.
func (x *exchange) accept(raw []byte) error {
	s, err := decodeStored(raw)
	if err != nil {
		return err
	}
	if s.IsBase64Encoded {
		if x.replBody, err = base64.StdEncoding.DecodeString(s.Body); err != nil {
			return fmt.Errorf("stored body: %w", err)
		}
	}
	x.stored = s
	return nil
}

// replay answers with the stored response, marked Idempotent-Replayed.
func (x *exchange) replay() {
	s, h := x.stored, x.w.Header()
	for k, v := range s.Headers {
		if _, multi := s.MultiValueHeaders[k]; !multi {
			h[k] = []string{v}
		}
	}
	for k, v := range s.MultiValueHeaders {
		h[k] = v
	}
	for _, c := range s.Cookies {
		h.Add("Set-Cookie", c)
	}
	n := len(s.Body)
	if s.IsBase64Encoded {
		n = len(x.replBody)
	}
	added := make([]string, 0, 2) // the values added, in one slice
	added = append(added, "true")
	h[HeaderReplayed] = added[0:1:1] // canonical, as HeaderReplayed is
	if firstValue(h, "Content-Length") == "" {
		added = append(added, strconv.Itoa(n))
		h["Content-Length"] = added[1:2:2]
	}
	x.w.WriteHeader(s.StatusCode)
	if s.IsBase64Encoded {
		_, _ = x.w.Write(x.replBody)
	} else {
		_, _ = io.WriteString(x.w, s.Body) // net/http's writer takes a string without a copy
	}
}
