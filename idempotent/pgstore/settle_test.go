package pgstore_test

import (
	"context"
	byteorder "encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/pgstore"
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

// settleAnswer is what a front door answered one call: a success and its
// body (and whether it was a replay), or the store's retryable failure
// (ErrStore, settled; over HTTP 503 store-unavailable).
type settleAnswer struct {
	ok          bool
	body        string
	replayed    bool
	unavailable bool
	detail      string // for messages
}

// settleDoors build a front door over store whose handler inserts the
// ledger row of key in pgstore.Tx and answers "run N"; each returns a
// function making one call.
var settleDoors = []struct {
	name  string
	build func(t *testing.T, store *pgstore.Store, l *ledger, runs *atomic.Int32) func() settleAnswer
}{
	{"Wrap", func(t *testing.T, store *pgstore.Store, l *ledger, runs *atomic.Int32) func() settleAnswer {
		replays := 0
		h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
			if ev.Outcome == idempotent.OutcomeReplayed {
				replays++
			}
		})), func(ctx context.Context, c charge) (string, error) {
			n := runs.Add(1)
			return "run " + strconv.Itoa(int(n)), l.insert(ctx, "charge "+c.Order, c.Cents, nil)
		}, idempotent.WithKey(chargeKey))
		return func() settleAnswer {
			before := replays
			out, err := h(ctxT(t), charge{Order: "o1", Cents: 500})
			detail := out
			if err != nil {
				detail = err.Error()
			}
			return settleAnswer{ok: err == nil, body: out, replayed: replays > before, detail: detail,
				unavailable: errors.Is(err, idempotent.ErrStore) && strings.Contains(err.Error(), "settled: nothing committed")}
		}
	}},
	{"NetHTTP", func(t *testing.T, store *pgstore.Store, l *ledger, runs *atomic.Int32) func() settleAnswer {
		srv := httptest.NewServer(nethttp.Middleware(idempotent.New(store))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := runs.Add(1)
			if err := l.insert(r.Context(), "charge o1", 500, nil); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("run " + strconv.Itoa(int(n))))
		})))
		t.Cleanup(srv.Close)
		return func() settleAnswer {
			req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"cents":500}`))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "o1")
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return settleAnswer{ok: resp.StatusCode == http.StatusCreated, body: string(b), replayed: resp.Header.Get(nethttp.HeaderReplayed) == "true",
				unavailable: resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), nethttp.ProblemStoreUnavailable),
				detail:      strconv.Itoa(resp.StatusCode) + " " + string(b)}
		}
	}},
}

// TestUnknownCommitIsSettled: through Wrap and the net/http door, each way
// of a COMMIT with an unknown outcome ends with the caller getting its
// response exactly when the COMMIT landed (else the store's retryable
// failure), the retry replaying it or running at once, and the ledger row
// written exactly once.
func TestUnknownCommitIsSettled(t *testing.T) {
	t.Parallel()
	for _, door := range settleDoors {
		for _, tc := range settleCases {
			t.Run(door.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				direct := newPool(t, nil)
				proxy := newCommitProxy(t, hostPort(t, postgresURL(t)))
				store := newTable(t, newPoolAt(t, proxy.url(postgresURL(t)), nil))
				l := newLedger(t, direct)
				var runs atomic.Int32
				call := door.build(t, store, l, &runs)

				proxy.arm(tc.fault)
				firstDone := make(chan settleAnswer, 1)
				go func() { firstDone <- call() }()
				if tc.fault == pgHeld {
					waitForLockWait(t, direct, store.Options().Table) // the settle waits for the held COMMIT
					close(proxy.release)
					waitFor(proxy.sent)
				}
				first := <-firstDone
				if tc.firstOK {
					assert.True(t, first.ok && first.body == "run 1", "the COMMIT landed: the caller gets its response, got %s", first.detail)
				} else {
					assert.True(t, first.unavailable, "nothing committed: the store's retryable failure, got %s", first.detail)
				}

				retry := call()
				require.True(t, retry.ok, "the retry replays or runs at once (never in progress for a lease): got %s", retry.detail)
				if tc.firstOK {
					assert.Equal(t, "run 1", retry.body)
					assert.True(t, retry.replayed, "a replay")
				} else {
					assert.Equal(t, "run 2", retry.body)
				}
				assert.Equal(t, []string{"charge o1"}, l.entries(t), "the write applied exactly once")
				t.Logf("first caller: %s; retry: %s (replayed %v); handler runs %d; ledger rows %d", first.detail, retry.detail, retry.replayed, runs.Load(), len(l.entries(t)))
			})
		}
	}
}

// hostPort is the host:port of a postgres:// URL.
func hostPort(t testing.TB, serverURL string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	return u.Host
}
