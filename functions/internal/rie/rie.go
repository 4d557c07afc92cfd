package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/internal/lambdatest"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// Environment variables read by this package.
const (
	// BinaryEnv, when set, is the path of the aws-lambda-rie to run instead
	// of the checkout's build/tools/aws-lambda-rie.
	BinaryEnv = "IDEMKIT_RIE"
	// RequireEnv, when "1", makes Binary fail instead of skip when there is no
	// emulator. The Makefile sets it for `make test`, which installs one.
	RequireEnv = "IDEMKIT_REQUIRE_RIE"
)

// InvokePath is the emulator's invoke API, Lambda's Invoke for the one
// function it runs.
const InvokePath = "/2015-03-31/functions/function/invocations"

// ErrTimedOut: the function did not answer within AWS_LAMBDA_FUNCTION_TIMEOUT,
// and the emulator killed its runtime.
var ErrTimedOut = errors.New("rie: task timed out")

// FunctionError is a function's error answer: what the runtime posted to
// /runtime/invocation/{id}/error, which the emulator returns as the body.
type FunctionError struct {
	// Type and Message are the error document's errorType and errorMessage.
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

// Error implements error.
func (e *FunctionError) Error() string { return "rie: function error " + e.Type + ": " + e.Message }

// Root returns the checkout's root folder (the one holding events/).
func Root() (string, error) {
	dir, err := samples.Dir()
	if err != nil {
		return "", fmt.Errorf("rie: %w", err)
	}
	return filepath.Dir(dir), nil
}

// Binary returns the path of the emulator: $IDEMKIT_RIE, or the checkout's
// build/tools/aws-lambda-rie (make rie). Without one it skips t, or fails it
// when IDEMKIT_REQUIRE_RIE=1.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(BinaryEnv)
	if path == "" {
		root, err := Root()
		if err != nil {
			t.Fatalf("%v", err)
		}
		path = filepath.Join(root, "build", "tools", "aws-lambda-rie")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("rie: %s=1 but there is no emulator at %s (make rie installs it): %v", RequireEnv, path, err)
		}
		t.Skipf("rie: no emulator at %s (run make rie, or set %s)", path, BinaryEnv)
	}
	return path
}

// Build compiles the main packages pkgs (import paths, or ./functions/...
// relative to the checkout's root), at once, each into a folder of t's, as
// make build does but for this machine, and with -race when this test
// binary has it, so their packages come from the build cache the test build
// filled. It returns the programs' paths, in the order of pkgs.
func Build(t testing.TB, pkgs ...string) []string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatalf("%v", err)
	}
	outs := make([]string, len(pkgs))
	errs := make([]error, len(pkgs))
	var wg sync.WaitGroup
	for i, pkg := range pkgs {
		outs[i] = filepath.Join(t.TempDir(), "bootstrap")
		args := []string{"build", "-tags", "lambda.norpc", "-o", outs[i]}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = root
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("rie: go build %s: %w\n%s", pkg, err, b)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%v", err)
	}
	return outs
}

// Config is one emulated function.
type Config struct {
	// Bootstrap is the program the emulator runs as the function's runtime.
	Bootstrap string
	// Timeout is AWS_LAMBDA_FUNCTION_TIMEOUT, in whole seconds (at least 1).
	Timeout time.Duration
	// Env is added to the emulator's environment, which it passes on to the
	// bootstrap ("NAME=value"; an empty value unsets).
	Env []string
}

// Emulator is one aws-lambda-rie process and the runtimes it started.
type Emulator struct {
	addr   string
	cmd    *exec.Cmd
	waited chan struct{}
	client *http.Client

	mu  sync.Mutex
	out bytes.Buffer
}

// Start runs cfg.Bootstrap under the emulator (Binary) on free loopback
// ports and waits until its invoke API answers; the runtime itself starts at
// the first invocation, as Lambda's cold start does. The emulator and every
// runtime it started are killed when t ends.
func Start(t testing.TB, cfg Config) *Emulator {
	t.Helper()
	bin := Binary(t)
	secs := int64(cfg.Timeout / time.Second)
	if secs < 1 || cfg.Timeout%time.Second != 0 {
		t.Fatalf("rie: Timeout %v: the emulator takes whole seconds, at least 1", cfg.Timeout)
	}
	env := lambdatest.MergeEnv(os.Environ(), append([]string{"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.FormatInt(secs, 10)}, cfg.Env...))
	var lastErr error
	for range 3 { // a port taken between our probe and the emulator's listen: try others
		e, err := start(bin, cfg.Bootstrap, env)
		if err == nil {
			t.Cleanup(func() {
				e.stop()
				if t.Failed() {
					t.Logf("rie: output of the emulator at %s:\n%s", e.addr, e.Output())
				}
			})
			return e
		}
		lastErr = err
	}
	t.Fatalf("%v", lastErr)
	return nil
}

func start(bin, bootstrap string, env []string) (*Emulator, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	e := &Emulator{
		addr:   net.JoinHostPort("127.0.0.1", ports[0]),
		waited: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{}},
	}
	e.cmd = exec.Command(bin,
		"--log-level", "info",
		"--runtime-interface-emulator-address", e.addr,
		"--runtime-api-address", net.JoinHostPort("127.0.0.1", ports[1]),
		bootstrap)
	e.cmd.Dir = filepath.Dir(bootstrap)
	e.cmd.Env = env
	e.cmd.Stdout = lambdatest.LockedWriter(&e.mu, &e.out)
	e.cmd.Stderr = lambdatest.LockedWriter(&e.mu, &e.out)
	// Its own process group, stopped by its PID; the emulator puts each
	// runtime it starts in a group of its own (see stop).
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The runtimes write to the same pipe: do not wait forever for a writer.
	e.cmd.WaitDelay = 5 * time.Second
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("rie: start %s: %w", bin, err)
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.waited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", e.addr, time.Second)
		if err == nil {
			_ = c.Close()
			return e, nil
		}
		select {
		case <-e.waited:
			return nil, fmt.Errorf("rie: the emulator exited at start-up: %s", e.Output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("rie: the emulator does not listen on %s after 15 s: %s", e.addr, e.Output())
		}
	}
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1.
func freePorts(n int) ([]string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("rie: free port: %w", err)
		}
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	return ports, nil
}

// stop kills the runtimes the emulator started, each by its process group,
// then the emulator's group, and waits for the emulator to exit.
func (e *Emulator) stop() {
	select {
	case <-e.waited:
		return
	default:
	}
	pid := e.cmd.Process.Pid
	runtimes, _ := children(pid) // before the emulator dies: they would be re-parented
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, r := range runtimes {
		killGroup(r)
	}
	<-e.waited
	e.client.CloseIdleConnections()
}

// killGroup kills pid's process group when pid leads it, else pid alone.
func killGroup(pid int) {
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// Address is the emulator's host:port.
func (e *Emulator) Address() string { return e.addr }

// Invoke posts event to the invoke API and returns the function's answer.
// A function error is a *FunctionError, a timeout ErrTimedOut, and any
// answer of the emulator's other than 200 an error naming its status.
func (e *Emulator) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.addr+InvokePath, bytes.NewReader(event))
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rie: invoke: the emulator answered %s: %s", resp.Status, body)
	}
	if bytes.HasPrefix(body, []byte("Task timed out after ")) {
		return nil, fmt.Errorf("%w: %s", ErrTimedOut, body)
	}
	if ferr := functionError(body); ferr != nil {
		return nil, ferr
	}
	return body, nil
}

// functionError decodes body as the runtime's error document: an object
// with errorMessage and errorType and nothing else but a stackTrace. The
// emulator returns it with status 200, as Invoke does (the header Invoke
// adds, X-Amz-Function-Error, it leaves out).
func functionError(body []byte) *FunctionError {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	_, msg := doc["errorMessage"]
	_, typ := doc["errorType"]
	delete(doc, "stackTrace")
	if !msg || !typ || len(doc) != 2 {
		return nil
	}
	var fe FunctionError
	if json.Unmarshal(body, &fe) != nil {
		return nil
	}
	return &fe
}

// Output returns what the emulator and its runtimes wrote so far.
func (e *Emulator) Output() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.out.String()
}

// emulatorLine matches the emulator's own lines: its log ("02 Dec 2026
// 12:31:19,002 [INFO] (rapid) ...") and the START, END and REPORT lines it
// prints around each invocation.
var emulatorLine = regexp.MustCompile(`^(\d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2},\d{3} \[[A-Z]+\] |(START|END|REPORT) RequestId: )`)

// FunctionOutput returns the lines the runtimes wrote so far, without the
// emulator's own.
func (e *Emulator) FunctionOutput() []string {
	var out []string
	for _, line := range strings.Split(e.Output(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !emulatorLine.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// Runtimes returns the PIDs of the emulator's live runtime processes: its
// children (at most one, between a timeout's kill and the next start none).
func (e *Emulator) Runtimes() ([]int, error) { return children(e.cmd.Process.Pid) }

// Freeze stops the running runtime with SIGSTOP: its handler then outlives
// any timeout, as one stuck in a call without a deadline would, until the
// emulator kills it (SIGKILL ends a stopped process too). It fails when no
// runtime runs.
func (e *Emulator) Freeze() error {
	pids, err := e.Runtimes()
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return errors.New("rie: freeze: no runtime runs")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("rie: freeze runtime %d: %w", pid, err)
		}
	}
	return nil
}

// children returns the PIDs of parent's child processes, read from
// /proc/PID/stat (field 4, after the parenthesized command name).
func children(parent int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("rie: list processes: %w", err)
	}
	var out []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 || fields[0] == "Z" {
			continue // a zombie is no runtime
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == parent {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			if err == nil {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}
