package reliability_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// The crashee binary is built once per test binary, into a temporary
// directory that TestMain removes.
var crashee struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func crasheePath(t *testing.T) string {
	t.Helper()
	crashee.once.Do(func() {
		crashee.dir, crashee.err = os.MkdirTemp("", "idemkit-crashee-")
		if crashee.err != nil {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			crashee.err = err
			return
		}
		path := filepath.Join(crashee.dir, "crashee")
		out, err := exec.Command(goTool, "build", "-o", path, "./internal/crashee").CombinedOutput()
		if err != nil {
			crashee.err = fmt.Errorf("go build ./internal/crashee: %v\n%s", err, out)
			return
		}
		crashee.path = path
	})
	require.NoError(t, crashee.err)
	return crashee.path
}

func removeCrashee() {
	if crashee.dir != "" {
		_ = os.RemoveAll(crashee.dir)
	}
}

// proc is a running crashee.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr *logBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startCrashee starts a crashee for one payments request on e's tables.
func startCrashee(t *testing.T, e *env, key string, args ...string) *proc {
	t.Helper()
	all := append([]string{"-idempotency-table", e.tables.Idempotency, "-payments-table", e.tables.Payments, "-key", key}, args...)
	cmd := exec.Command(crasheePath(t), all...)
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 16), stderr: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			_ = cmd.Process.Signal(syscall.SIGCONT)
			<-p.exited
		}
		if t.Failed() {
			t.Logf("crashee %v stderr:\n%s", args, p.stderr.String())
		}
	})
	return p
}

// expect returns the next stdout line, which must start with prefix.
func (p *proc) expect(prefix string) string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		require.True(p.t, ok, "crashee exited before %q; stderr:\n%s", prefix, p.stderr.String())
		require.True(p.t, strings.HasPrefix(line, prefix+" "), "got %q, want %s ...", line, prefix)
		return strings.TrimPrefix(line, prefix+" ")
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no %q from crashee within 30 s; stderr:\n%s", prefix, p.stderr.String())
		return ""
	}
}

// response reads the RESPONSE line and waits for a clean exit.
func (p *proc) response() httpResponse {
	p.t.Helper()
	var r httpResponse
	require.NoError(p.t, json.Unmarshal([]byte(p.expect("RESPONSE")), &r.APIGatewayV2HTTPResponse))
	<-p.exited
	require.NoError(p.t, p.err, "stderr:\n%s", p.stderr.String())
	if r.StatusCode == http.StatusCreated {
		require.NoError(p.t, json.Unmarshal([]byte(r.Body), &r.payment))
	} else {
		_ = json.Unmarshal([]byte(r.Body), &r.problem)
	}
	return r
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// waitStopped waits until every thread of the process is stopped (state T
// in /proc), as SIGSTOP's group stop completes asynchronously.
func (p *proc) waitStopped() {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p.cmd.Process.Pid))
		require.NoError(p.t, err)
		stopped := len(tasks) > 0
		for _, task := range tasks {
			stat, err := os.ReadFile(task)
			if err != nil {
				stopped = false
				break
			}
			// The state follows the parenthesized command name.
			fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(fields) == 0 || (fields[0] != "T" && fields[0] != "t") {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		require.True(p.t, time.Now().Before(deadline), "crashee not stopped within 10 s")
		time.Sleep(5 * time.Millisecond)
	}
}

// httpResponse is a payments answer with its body decoded.
type httpResponse struct {
	events.APIGatewayV2HTTPResponse
	payment payments.Payment
	problem struct {
		Type string `json:"type"`
	}
}

func (r httpResponse) replayed() bool { return r.Headers[nethttp.HeaderReplayed] == "true" }

// ledger scans the payments table.
func (e *env) ledger(t testing.TB) []payments.LedgerItem {
	t.Helper()
	var out []payments.LedgerItem
	for _, it := range scanAll(t, e.client, e.tables.Payments) {
		out = append(out, payments.LedgerItem{
			Payment:      payments.Payment{PaymentID: str(it, "paymentId"), CustomerID: str(it, "customerId")},
			ProcessorKey: str(it, "processorKey"),
		})
	}
	return out
}

// onlyRecord returns the single record of the idempotency table.
func (e *env) onlyRecord(t testing.TB) map[string]string {
	t.Helper()
	items := e.records(t)
	require.Len(t, items, 1)
	it := items[0]
	return map[string]string{"id": str(it, "id"), "status": str(it, "status"), "lease": str(it, "lease"),
		"in_progress_expiration": num(it, "in_progress_expiration")}
}

// TestCrashKill9: a process killed (SIGKILL) after its side effect (the
// charge, a recorded step) and before its completion's transaction (which
// carries the ledger row) leaves its record INPROGRESS and the ledger empty;
// a retry before the lease ends gets 409 in-progress (ErrInProgress); a
// retry after it takes over, resumes after the recorded charge (the same
// charge, not a second) and commits the ledger row with its completion: one
// payment, and the takeover answers with it. Later retries replay it. No key
// stays stuck.
func TestCrashKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := newKey(t)

	started := time.Now()
	crashed := startCrashee(t, e, key, "-after-write", "hang", "-lease", testLease.String(), "-skew", "100ms")
	ready := strings.Fields(crashed.expect("READY"))
	require.Len(t, ready, 2)
	firstPayment, processorKey := ready[0], ready[1]
	claimedBy := time.Now()
	crashed.signal(syscall.SIGKILL)
	<-crashed.exited
	require.ErrorContains(t, crashed.err, "killed")

	rec := e.onlyRecord(t)
	assert.Equal(t, string(storage.StatusInProgress), rec["status"], "the crashed owner's record stays INPROGRESS")
	leaseEnd := parseMillis(t, rec["in_progress_expiration"])
	lease := testLease + 100*time.Millisecond
	between(t, "lease end", leaseEnd, started.Add(lease-time.Millisecond), claimedBy.Add(lease))
	assert.Empty(t, e.ledger(t), "the ledger row commits with the completion, which never happened")

	early := startCrashee(t, e, key).response()
	assert.Equal(t, http.StatusConflict, early.StatusCode)
	assert.Equal(t, nethttp.ProblemInProgress, early.problem.Type)

	late := startCrashee(t, e, key, "-offset", pastLease.String())
	took := late.response()
	require.Equal(t, http.StatusCreated, took.StatusCode, took.Body)
	assert.False(t, took.replayed())
	assert.NotEmpty(t, late.stderr.find(t, map[string]any{"outcome": "executed", "took_over": true}),
		"the takeover ran the handler again, and says so")
	assert.Equal(t, firstPayment, took.payment.PaymentID, "the takeover answers with the first run's charge (its recorded step)")
	assertOnePayment(t, e.ledger(t), processorKey, took.payment.PaymentID)
	rec = e.onlyRecord(t)
	assert.Equal(t, string(storage.StatusCompleted), rec["status"])

	replay := startCrashee(t, e, key).response()
	require.Equal(t, http.StatusCreated, replay.StatusCode)
	assert.True(t, replay.replayed())
	assert.Equal(t, took.payment, replay.payment)
	assert.Empty(t, e.inProgress(t), "no stuck key")
}

// assertOnePayment checks the ledger after a takeover: only the run that
// completed committed its row, with the charge both runs share (the step it
// resumed), so it holds one item, the payment the taking-over run answered
// with.
func assertOnePayment(t *testing.T, ledger []payments.LedgerItem, processorKey, answered string) {
	t.Helper()
	require.Len(t, ledger, 1, "one payment although the handler ran twice: %v", ledger)
	assert.Equal(t, processorKey, ledger[0].ProcessorKey)
	assert.Equal(t, answered, ledger[0].PaymentID)
}

// TestPauseLeaseLost: a process paused (SIGSTOP) after its side effect (the
// recorded charge), past its lease, before its completion's transaction, is
// taken over by a second invocation, which resumes after the charge and
// completes with the ledger row. (No real time passes: the second process's
// clock is put past the lease; the stop shows that the owner can do nothing
// while it is taken over.) Resumed (SIGCONT), the first sends its transaction
// (the crashee waits for a line on stdin, sent after SIGCONT, so that the
// order is certain), which the fence refuses: nothing of it commits (its
// ledger row is discarded with its lease), it logs lease_lost, and its own
// caller gets what a retry gets, 409 in-progress, never a success whose row
// did not commit. The stored response (what every later retry gets) is the
// second's.
func TestPauseLeaseLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := newKey(t)

	paused := startCrashee(t, e, key, "-after-write", "stdin", "-lease", testLease.String(), "-skew", "100ms")
	ready := strings.Fields(paused.expect("READY"))
	require.Len(t, ready, 2)
	firstPayment, processorKey := ready[0], ready[1]
	paused.signal(syscall.SIGSTOP)
	paused.waitStopped()

	second := startCrashee(t, e, key, "-offset", pastLease.String()) // after the paused owner's lease
	took := second.response()
	require.Equal(t, http.StatusCreated, took.StatusCode, took.Body)
	assert.NotEmpty(t, second.stderr.find(t, map[string]any{"outcome": "executed", "took_over": true}))

	paused.signal(syscall.SIGCONT)
	_, err := io.WriteString(paused.stdin, "go\n") // the handler returns
	require.NoError(t, err)
	first := paused.response()
	require.Equal(t, http.StatusConflict, first.StatusCode, "the paused invocation's caller gets no success: its transaction did not commit")
	assert.Equal(t, nethttp.ProblemInProgress, first.problem.Type)
	lost := paused.stderr.find(t, map[string]any{"outcome": "lease_lost", "level": "ERROR"})
	require.Len(t, lost, 1, "stderr:\n%s", paused.stderr.String())
	assert.Contains(t, lost[0]["error"], "lease lost")

	rec := e.onlyRecord(t)
	assert.Equal(t, string(storage.StatusCompleted), rec["status"])
	replay := startCrashee(t, e, key).response()
	assert.True(t, replay.replayed())
	assert.Equal(t, took.payment, replay.payment, "the stored response is the second invocation's")

	assert.Equal(t, firstPayment, took.payment.PaymentID, "both runs answer with the one payment")
	assertOnePayment(t, e.ledger(t), processorKey, took.payment.PaymentID)
	for _, p := range []*proc{paused, second} {
		assert.NotContains(t, p.stderr.String(), key, "no raw key in the logs")
	}
}

func parseMillis(t testing.TB, s string) time.Time {
	t.Helper()
	var ms int64
	_, err := fmt.Sscan(s, &ms)
	require.NoError(t, err, "epoch ms %q", s)
	return time.UnixMilli(ms)
}
