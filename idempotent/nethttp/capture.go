package nethttp

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent/internal/bodybuf"
)

// Why a response passed through to the client before the record was
// completed, and so was not stored (the record is completed without it:
// Engine.NotStored).
const (
	passFlushed  = "flushed"
	passTooLarge = "too-large"
	passDirect   = "no-key" // a request without a key: there is no record to keep it in
)

// errHeld is FlushError's answer while the handler's transaction is open.
var errHeld = errors.New("nethttp: not flushed: the response is held until the handler's transaction commits")

// capture is the http.ResponseWriter the handler of a keyed request writes
// to. It buffers the response (status, header as of WriteHeader, body up to
// a limit) so that the client gets it only once the record is settled: a
// client never receives a response that its retry would not get back. A
// Flush, or a body past the limit, makes it pass the response through
// instead (see pass).
//
// The handler's header is the real writer's own map, as without the
// middleware: nothing reaches the client before the real writer's
// WriteHeader, and the capture puts the map back as of the handler's
// WriteHeader (or as outer middleware left it, for a problem) before that.
//
// It offers http.Flusher (and FlushError, SetReadDeadline and
// SetWriteDeadline for http.ResponseController) but not http.Hijacker: a
// hijacked connection's bytes could be neither stored nor replayed.
type capture struct {
	w     http.ResponseWriter // the real writer
	outer http.Header         // a copy of its header before the handler ran: what outer middleware set
	limit int64

	status int            // 0 until the handler writes a final status
	sent   http.Header    // a copy of the header as of the final status, as net/http takes it
	body   bodybuf.Buffer // a string: the stored form takes it without a copy
	passed string         // why the response passed through; "" while buffering
	silent bool           // the handler returned without a status or a body: settle answered 200 for it
	direct bool           // a request without a key: the response passes through as soon as it begins
	guard  txGuard        // the handler's transaction: while open, the response is held
	failed error          // the failure the handler reported with Fail
}

// init readies c to capture a response meant for w.
func (c *capture) init(w http.ResponseWriter, limit int64) {
	c.w, c.limit = w, limit
	if h := w.Header(); len(h) > 0 { // as most writers come: nothing to copy
		c.outer = h.Clone()
	}
}

// held reports whether the response is held past the limit for the
// handler's transaction: it reaches the client after the commit, and is
// not stored.
func (c *capture) held() bool { return c.passed == "" && int64(c.body.Len()) > c.limit }

func (c *capture) Header() http.Header { return c.w.Header() }

// WriteHeader records the status and a copy of the header, as net/http
// does. Informational statuses (1xx) are dropped: they are neither sent nor
// stored. Later calls are ignored.
func (c *capture) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http
	}
	if c.status != 0 || code < 200 {
		return
	}
	c.status, c.sent = code, c.w.Header().Clone()
	switch {
	case c.passed != "":
		c.commit()
	case c.direct:
		c.pass(passDirect)
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.buffering(len(p)) {
		return c.body.Write(p)
	}
	return c.w.Write(p)
}

// WriteString is Write without a copy of s, as net/http's writer offers it
// (io.WriteString and fmt use it).
func (c *capture) WriteString(s string) (int, error) {
	if c.buffering(len(s)) {
		return c.body.WriteString(s)
	}
	return io.WriteString(c.w, s)
}

// buffering readies a write of n bytes, and says whether it goes to the
// buffer or (past the limit, or after a flush) straight to the client.
func (c *capture) buffering(n int) bool {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.passed == "" && int64(c.body.Len())+int64(n) > c.limit {
		c.pass(passTooLarge)
	}
	return c.passed == ""
}

// Flush passes the response through: what is buffered is sent, and what
// follows goes straight to the client. The response is then not stored.
// While the handler's transaction is open, nothing is sent (see txGuard).
func (c *capture) Flush() { _ = c.FlushError() }

// FlushError is Flush for http.ResponseController, with the error of the
// real writer's flush, or errHeld while the handler's transaction is open.
func (c *capture) FlushError() error {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.pass(passFlushed)
	if c.passed == "" {
		return errHeld
	}
	return http.NewResponseController(c.w).Flush()
}

// SetReadDeadline is the real writer's, for http.ResponseController.
func (c *capture) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(c.w).SetReadDeadline(t)
}

// SetWriteDeadline is the real writer's, for http.ResponseController.
func (c *capture) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(c.w).SetWriteDeadline(t)
}

// pass switches to passing the response through, for the reason given; the
// status is written by then. While the handler's transaction is open, the
// response stays held: it must not reach the client before the commit.
func (c *capture) pass(reason string) {
	if c.passed != "" || !c.guard.send() {
		return
	}
	c.passed = reason
	c.commit()
}

// commit sends the status, the header as of the handler's WriteHeader and
// the buffered body to the client.
func (c *capture) commit() {
	restore(c.w.Header(), c.sent)
	c.send()
}

// send sends the status and the buffered body; the header is as of the
// handler's WriteHeader.
func (c *capture) send() {
	c.w.WriteHeader(c.status)
	if c.body.Len() > 0 {
		// A gone client is the handler's to notice on its next write. (net/http's
		// writer is an io.StringWriter: no copy.)
		_, _ = io.WriteString(c.w, c.body.String())
		c.body.Reset()
	}
}

// settle ends the handler's turn: a handler that wrote nothing answered 200
// with an empty body, as under net/http (unless its context had ended: see
// exchange.work).
func (c *capture) settle() {
	if c.status == 0 {
		c.silent = true
		c.WriteHeader(http.StatusOK)
	}
}

// deliver sends the buffered response, once the record is settled, with the
// trailers the handler set (declared in a Trailer header, or named with
// http.TrailerPrefix): taken aside before commit puts the header back as of
// WriteHeader, and set again after it, when net/http sends them as trailers.
func (c *capture) deliver() {
	if c.passed != "" {
		return
	}
	h := c.w.Header()
	if maps.EqualFunc(h, c.sent, sameValues) {
		// As of WriteHeader, as most handlers leave it: any trailers are
		// in it already, and there is nothing to put back.
		c.send()
		return
	}
	var trailers http.Header // most responses have none
	keep := func(name string, v []string) {
		if trailers == nil {
			trailers = http.Header{}
		}
		trailers[name] = v
	}
	for k, v := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			keep(k, v)
		}
	}
	for _, list := range c.sent["Trailer"] { // canonical: Values without canonicalizing it
		for name := range strings.SplitSeq(list, ",") {
			if name = http.CanonicalHeaderKey(strings.TrimSpace(name)); name != "" {
				if v, ok := h[name]; ok {
					keep(name, v)
				}
			}
		}
	}
	c.commit()
	maps.Copy(h, trailers)
}

// discardHeld drops a response held for the handler's transaction, which
// did not commit (see txGuard): nothing of it reached the client.
func (c *capture) discardHeld() {
	if c.w != nil && c.passed == "" {
		c.discard()
	}
}

// discard puts the real writer's header back as outer middleware left it,
// for an answer that is not the handler's (a problem after a panic).
func (c *capture) discard() { restore(c.w.Header(), c.outer) }

// storedHeader returns the header of the response as the handler set it,
// for the record: without the headers outer middleware set (with the same
// values) before this one, which they set again for a duplicate, and without
// trailers. The header filter (headerFilter) drops the rest.
func (c *capture) storedHeader() map[string][]string {
	left := func(k string, v []string) bool {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
		ov, ok := c.outer[k]
		return ok && sameValues(ov, v)
	}
	whole := true
	for k, v := range c.sent {
		if left(k, v) {
			whole = false
			break
		}
	}
	if whole {
		return c.sent // the usual case: c.sent is the capture's own copy, and the record's as it is
	}
	out := make(map[string][]string, len(c.sent))
	for k, v := range c.sent {
		if !left(k, v) {
			out[k] = v
		}
	}
	return out
}

// restore makes h hold exactly the names and values of saved (a copy, so
// that later changes to h leave saved as it was); most handlers leave the
// header as it was, and then h is left alone.
func restore(h, saved http.Header) {
	if maps.EqualFunc(h, saved, sameValues) {
		return
	}
	clear(h)
	maps.Copy(h, saved.Clone())
}

// sameValues reports whether a header's two lists of values are the same,
// a nil list (which net/http reads as "do not send") apart from an empty one.
func sameValues(a, b []string) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}
