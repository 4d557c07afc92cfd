package main

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runtimeAPI is a minimal Lambda Runtime API (2018-06-01) for one cold start:
// the first GET .../invocation/next gets the event, the function's POST
// .../invocation/<id>/response (or /error) is the answer, and every later
// /next waits until the function is killed. It records when each happened.
// See https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html and
// aws-lambda-go's lambda/runtime_api_client.go.
type runtimeAPI struct {
	event []byte
	arn   string

	ln  net.Listener
	srv *http.Server

	mu      sync.Mutex
	served  bool
	nextAt  time.Time // the first GET /next: the end of init
	done    chan struct{}
	doneAt  time.Time
	kind    string // "response", "error" or "init/error"
	answer  []byte
	closeFn sync.Once
}

const runtimeAPIPrefix = "/2018-06-01/runtime/"

func startRuntimeAPI(event []byte, arn string) (*runtimeAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	api := &runtimeAPI{event: event, arn: arn, ln: ln, done: make(chan struct{})}
	api.srv = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = api.srv.Serve(ln) }()
	return api, nil
}

// addr is the value of AWS_LAMBDA_RUNTIME_API.
func (a *runtimeAPI) addr() string { return a.ln.Addr().String() }

func (a *runtimeAPI) close() { _ = a.srv.Close() }

func (a *runtimeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	path, ok := strings.CutPrefix(r.URL.Path, runtimeAPIPrefix)
	switch {
	case !ok:
		http.NotFound(w, r)
	case r.Method == http.MethodGet && path == "invocation/next":
		a.mu.Lock()
		first := !a.served
		if first {
			a.served, a.nextAt = true, now
		}
		a.mu.Unlock()
		if !first {
			<-r.Context().Done() // no second invocation: wait to be killed
			return
		}
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", "cold-start-1")
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", a.arn)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(a.event)
	case r.Method == http.MethodPost && (strings.HasPrefix(path, "invocation/") || path == "init/error"):
		body, _ := io.ReadAll(r.Body)
		kind := "init/error"
		if path != "init/error" {
			kind = path[strings.LastIndexByte(path, '/')+1:]
		}
		w.WriteHeader(http.StatusAccepted)
		a.closeFn.Do(func() {
			a.mu.Lock()
			a.doneAt, a.kind, a.answer = now, kind, body
			a.mu.Unlock()
			close(a.done)
		})
	default:
		http.NotFound(w, r)
	}
}
