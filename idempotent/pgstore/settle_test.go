package pgstore_test

import (
	"bytes"
	"context"
	byteorder "encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// The commit of a handler's transaction whose outcome the client cannot
// know (the connection is lost during COMMIT) is settled at once by the
// record's fence (docs/transactions.md): the release's DELETE … WHERE lease
// = $1 AND status = 'INPROGRESS' waits for a COMMIT the server is still
// running, then decides. commitProxy injects the three ways the outcome can
// be unknown, between pgx and the real server.

// pgFault is what commitProxy does to the next COMMIT.
type pgFault int

const (
	pgNoFault    pgFault = iota
	pgNotReached         // the COMMIT never reaches the server; the connection is cut
	pgCommitted          // the server commits; the answer is lost with the connection
	pgHeld               // the client's connection is cut, the COMMIT held and sent to the server later (release)
)

// commitProxy is a TCP proxy in front of PostgreSQL that reads the
// frontend's messages and applies its armed fault to the next simple-query
// COMMIT (pgx's Tx.Commit sends "commit" so).
type commitProxy struct {
	t       testing.TB
	ln      net.Listener
	target  string
	fault   atomic.Int32
	release chan struct{} // pgHeld: closed to send the held COMMIT
	sent    chan struct{} // pgHeld: closed once the held COMMIT was answered
}

func newCommitProxy(t testing.TB, target string) *commitProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &commitProxy{t: t, ln: ln, target: target, release: make(chan struct{}), sent: make(chan struct{})}
	t.Cleanup(func() { _ = ln.Close() })
	go p.accept()
	return p
}

// url is the server's URL through the proxy.
func (p *commitProxy) url(serverURL string) string {
	u, err := url.Parse(serverURL)
	require.NoError(p.t, err)
	u.Host = p.ln.Addr().String()
	return u.String()
}

func (p *commitProxy) arm(f pgFault) { p.fault.Store(int32(f)) }

func (p *commitProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		go p.serve(client, server)
	}
}

func (p *commitProxy) serve(client, server net.Conn) {
	var swallow atomic.Bool            // the server's answers no longer reach the client
	answered := make(chan struct{}, 1) // an answer was swallowed
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if swallow.Load() {
					select {
					case answered <- struct{}{}:
					default:
					}
				} else {
					_, _ = client.Write(buf[:n])
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	closeBoth := func() { _ = client.Close(); _ = server.Close() }
	// The startup message has no type byte: its length, then the rest.
	startup, err := readMessage(client, false)
	if err != nil {
		closeBoth()
		return
	}
	if _, err := server.Write(startup); err != nil {
		closeBoth()
		return
	}
	for {
		msg, err := readMessage(client, true)
		if err != nil {
			_ = server.Close()
			return
		}
		if msg[0] == 'Q' && strings.EqualFold(strings.TrimRight(string(msg[5:]), "\x00; "), "commit") {
			switch pgFault(p.fault.Swap(int32(pgNoFault))) {
			case pgNotReached:
				closeBoth()
				return
			case pgCommitted:
				swallow.Store(true)
				_, _ = server.Write(msg)
				waitFor(answered)
				closeBoth()
				return
			case pgHeld:
				swallow.Store(true)
				_ = client.Close()
				<-p.release
				_, _ = server.Write(msg)
				waitFor(answered)
				close(p.sent)
				_ = server.Close()
				return
			}
		}
		if _, err := server.Write(msg); err != nil {
			_ = client.Close()
			return
		}
	}
}

// waitFor waits for ch, at most 10 s (a proxy never hangs a test).
func waitFor(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
	}
}

// readMessage reads one frontend message: [type byte] int32 length, body.
func readMessage(r io.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	n := int(byteorder.BigEndian.Uint32(msg[head-4:]))
	if n < 4 || n > 1<<30 {
		return nil, errors.New("bad message length")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return append(msg, body...), nil
}

// settleCase is one way the COMMIT's outcome is unknown, and what follows.
type settleCase struct {
	name  string
	fault pgFault
	// firstOK: the first caller gets its response (the COMMIT landed, and
	// the settle found the record COMPLETED under its lease); else it gets
	// ErrStore and its retry runs the handler at once.
	firstOK bool
}

var settleCases = []settleCase{
	{"NeverReachedTheServer", pgNotReached, false},
	{"CommittedAnswerLost", pgCommitted, true},
	// The settle's DELETE waits for the held COMMIT's row lock, then finds
	// what it committed.
	{"HeldAndAppliedDuringTheSettle", pgHeld, true},
}

func TestUnknownCommitIsSettledThroughWrap(t *testing.T) {
	t.Parallel()
	for _, tc := range settleCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			direct := newPool(t, nil)
			proxy := newCommitProxy(t, hostPort(t, postgresURL(t)))
			pool := newPoolAt(t, proxy.url(postgresURL(t)), nil)
			store := newTable(t, pool)
			l := newLedger(t, direct)
			var runs atomic.Int32
			h := idempotent.Wrap(idempotent.New(store), func(ctx context.Context, c charge) (string, error) {
				n := runs.Add(1)
				if err := l.insert(ctx, "charge "+c.Order, c.Cents, nil); err != nil {
					return "", err
				}
				return "charged " + c.Order + " run " + string(rune('0'+n)), nil
			}, idempotent.WithKey(chargeKey))

			proxy.arm(tc.fault)
			type result struct {
				out string
				err error
			}
			first := make(chan result, 1)
			go func() {
				out, err := h(ctxT(t), charge{Order: "o1", Cents: 500})
				first <- result{out, err}
			}()
			if tc.fault == pgHeld {
				waitForLockWait(t, direct, store.Options().Table) // the settle waits for the held COMMIT
				close(proxy.release)
				waitFor(proxy.sent)
			}
			r := <-first
			if tc.firstOK {
				require.NoError(t, r.err, "the COMMIT landed: the caller gets its response")
				assert.Equal(t, "charged o1 run 1", r.out)
			} else {
				require.ErrorIs(t, r.err, idempotent.ErrStore)
				assert.Contains(t, r.err.Error(), "settled: nothing committed")
			}

			out, err := h(ctxT(t), charge{Order: "o1", Cents: 500})
			require.NoError(t, err, "the retry replays or runs at once: never in progress for a lease")
			if tc.firstOK {
				assert.Equal(t, "charged o1 run 1", out, "a replay")
				assert.Equal(t, int32(1), runs.Load())
			} else {
				assert.Equal(t, "charged o1 run 2", out)
				assert.Equal(t, int32(2), runs.Load())
			}
			assert.Equal(t, []string{"charge o1"}, l.entries(t), "the write applied exactly once")
		})
	}
}

func TestUnknownCommitIsSettledThroughNetHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range settleCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			direct := newPool(t, nil)
			proxy := newCommitProxy(t, hostPort(t, postgresURL(t)))
			pool := newPoolAt(t, proxy.url(postgresURL(t)), nil)
			store := newTable(t, pool)
			l := newLedger(t, direct)
			var runs atomic.Int32
			srv := httptest.NewServer(nethttp.Middleware(idempotent.New(store))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				if err := l.insert(r.Context(), "charge p1", 500, nil); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("run " + string(rune('0'+n))))
			})))
			t.Cleanup(srv.Close)
			post := func() (int, string, http.Header) {
				req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"cents":500}`))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", "p1")
				req.Header.Set("Content-Type", "application/json")
				resp, err := srv.Client().Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				var b bytes.Buffer
				_, err = b.ReadFrom(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, b.String(), resp.Header
			}

			proxy.arm(tc.fault)
			type answer struct {
				status int
				body   string
			}
			first := make(chan answer, 1)
			go func() {
				status, body, _ := post()
				first <- answer{status, body}
			}()
			if tc.fault == pgHeld {
				waitForLockWait(t, direct, store.Options().Table)
				close(proxy.release)
				waitFor(proxy.sent)
			}
			a := <-first
			if tc.firstOK {
				assert.Equal(t, http.StatusCreated, a.status, a.body)
				assert.Equal(t, "run 1", a.body)
			} else {
				assert.Equal(t, http.StatusServiceUnavailable, a.status, a.body)
				assert.Contains(t, a.body, nethttp.ProblemStoreUnavailable)
			}

			status, body, header := post()
			assert.Equal(t, http.StatusCreated, status, "never a 409 for the length of a lease: %s", body)
			if tc.firstOK {
				assert.Equal(t, "run 1", body)
				assert.Equal(t, "true", header.Get(nethttp.HeaderReplayed))
			} else {
				assert.Equal(t, "run 2", body)
			}
			assert.Equal(t, []string{"charge p1"}, l.entries(t), "the write applied exactly once")
		})
	}
}

// hostPort is the host:port of a postgres:// URL.
func hostPort(t testing.TB, serverURL string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	return u.Host
}
