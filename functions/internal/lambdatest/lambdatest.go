package lambdatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MainEnv is the variable that makes a test binary run its package's main
// instead of its tests; see RunMainIfChild.
const MainEnv = "IDEMKIT_LAMBDATEST_MAIN"

// RunMainIfChild runs main and exits when the process was started by Start;
// call it first in the TestMain of a main package:
//
//	func TestMain(m *testing.M) { lambdatest.RunMainIfChild(main); os.Exit(m.Run()) }
func RunMainIfChild(main func()) {
	if os.Getenv(MainEnv) == "1" {
		main()
		os.Exit(0)
	}
}

// Result is a function's answer to one invocation.
type Result struct {
	// Body is the response, or the error document when Failed.
	Body []byte
	// Failed reports that the function returned an error.
	Failed bool
}

// RuntimeAPI is a fake of the Lambda Runtime API
// (/2018-06-01/runtime/invocation/...) serving events one at a time.
type RuntimeAPI struct {
	srv     *httptest.Server
	pending chan pending
	done    chan struct{}

	mu      sync.Mutex
	waiting map[string]chan Result
	seq     int
}

type pending struct {
	id       string
	event    []byte
	deadline time.Time
}

// NewRuntimeAPI starts a fake Runtime API, closed when t ends.
func NewRuntimeAPI(t testing.TB) *RuntimeAPI {
	r := &RuntimeAPI{pending: make(chan pending), done: make(chan struct{}), waiting: map[string]chan Result{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", r.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", r.answer(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", r.answer(true))
	r.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(r.done)
		r.srv.Close()
	})
	return r
}

// Address is the value of AWS_LAMBDA_RUNTIME_API for the runtime.
func (r *RuntimeAPI) Address() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *RuntimeAPI) next(w http.ResponseWriter, req *http.Request) {
	select {
	case p := <-r.pending:
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", p.id)
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(p.deadline.UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:idemkit-test")
		w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(p.event)
	case <-req.Context().Done():
	case <-r.done:
		w.WriteHeader(http.StatusGone)
	}
}

func (r *RuntimeAPI) answer(failed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		ch := r.waiting[req.PathValue("id")]
		delete(r.waiting, req.PathValue("id"))
		r.mu.Unlock()
		if ch == nil {
			http.Error(w, "unknown request id", http.StatusBadRequest)
			return
		}
		ch <- Result{Body: body, Failed: failed}
		w.WriteHeader(http.StatusAccepted)
	}
}

// Invoke hands event to the runtime with a deadline timeout from now, as
// Lambda does with the function's timeout, and waits for its answer.
func (r *RuntimeAPI) Invoke(ctx context.Context, event []byte, timeout time.Duration) (Result, error) {
	r.mu.Lock()
	r.seq++
	id := fmt.Sprintf("req-%04d", r.seq)
	ch := make(chan Result, 1)
	r.waiting[id] = ch
	r.mu.Unlock()
	select {
	case r.pending <- pending{id: id, event: event, deadline: time.Now().Add(timeout)}:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("lambdatest: the runtime did not ask for the next invocation: %w", ctx.Err())
	}
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("lambdatest: no answer to %s: %w", id, ctx.Err())
	}
}

// Process is a main package running in a child process.
type Process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	waited chan struct{}
	err    error
}

// Start runs the test binary as its package's main (see RunMainIfChild),
// with the current environment plus env ("NAME=value"; an empty value
// unsets), and stops it when t ends.
func Start(t testing.TB, env ...string) *Process {
	t.Helper()
	p := &Process{waited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = mergeEnv(os.Environ(), append([]string{MainEnv + "=1"}, env...))
	p.cmd.Stdout = lockedWriter{&p.mu, &p.stdout}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stdout}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("lambdatest: start: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // the process started here, by its handle
		<-p.waited
	})
	return p
}

// Wait waits up to timeout for the process to exit and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.waited:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("lambdatest: the process still runs after %v", timeout)
	}
}

// Output returns what the process wrote to stdout and stderr so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

// Write writes b under the lock.
func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// mergeEnv applies overrides ("NAME=value", empty value to unset) to base.
func mergeEnv(base, overrides []string) []string {
	set := map[string]string{}
	var order []string
	for _, kv := range append(append([]string{}, base...), overrides...) {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		if set[k] != "" {
			out = append(out, k+"="+set[k])
		}
	}
	return out
}
