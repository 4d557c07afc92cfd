package lambdatest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	p.cmd.Env = MergeEnv(os.Environ(), append([]string{MainEnv + "=1"}, env...))
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

// LockedWriter returns a writer that writes to w under mu: a child process's
// stdout and stderr into one buffer that a test reads meanwhile.
func LockedWriter(mu *sync.Mutex, w io.Writer) io.Writer { return lockedWriter{mu, w} }

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

// MergeEnv applies overrides ("NAME=value", empty value to unset) to base,
// an environment as os.Environ returns it, keeping the order of first
// appearance.
func MergeEnv(base, overrides []string) []string {
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
