package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// §9: the net/http middleware. In process, its cost over the bare handler
// (go test -bench of idempotent/nethttp); over real HTTP on DynamoDB Local,
// its distance from the floor (§2's method) and its calls per request.

// httpResult is §9's measurements.
type httpResult struct {
	Command string              // how the in-process benchmarks ran
	Raw     string              // their go test output
	Medians map[string]benchFig // by sub-benchmark: bare, first-run, replay, first-run-raw, replay-raw
	Floor   []floorResult       // over HTTP: new key, replay
	Calls   []callsResult       // over HTTP: new key, replay, in progress
	CPU     cpuPairs            // client CPU, ServeHTTP called in process, against the floor
	Instr   instrPairs          // client instructions, the same drivers under callgrind
	// InstrErr is why Instr was not measured ("" if it was).
	InstrErr string
}

// added is a sub-benchmark's median cost less the bare handler's.
func (r *httpResult) added(name string) (benchFig, bool) {
	f, ok := r.Medians[name]
	bare, okb := r.Medians["bare"]
	if !ok || !okb {
		return benchFig{}, false
	}
	return benchFig{NsOp: f.NsOp - bare.NsOp, BOp: f.BOp - bare.BOp, AllocsOp: f.AllocsOp - bare.AllocsOp}, true
}

// runHTTPInproc runs BenchmarkMiddleware count times, as runInproc runs the
// core's benchmarks.
func runHTTPInproc(ctx context.Context, root, buildDir string, count int, benchtime string, res *httpResult, progress func(string)) error {
	bin := filepath.Join(buildDir, "nethttp.test")
	progress("compile the nethttp test binary")
	if b, err := goCmd(ctx, root, "test", "-c", "-o", bin, "./idempotent/nethttp").CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c: %w\n%s", err, b)
	}
	args := []string{"-test.run", "^$", "-test.bench", "^BenchmarkMiddleware$", "-test.benchmem", "-test.count", "1", "-test.benchtime", benchtime}
	pkgDir := filepath.Join(root, "idempotent", "nethttp")
	res.Command = fmt.Sprintf("go test -c -o %s ./idempotent/nethttp && cd idempotent/nethttp && for i in $(seq %d); do %s %s; done",
		rel(root, bin), count, rel(pkgDir, bin), strings.Join(quoteAll(args), " "))
	progress("run " + res.Command)
	var out []byte
	for i := range count {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = pkgDir
		pass, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("benchmarks, pass %d: %w\n%s", i+1, err, pass)
		}
		out = append(out, benchLines(pass, i == 0)...)
	}
	res.Raw = string(out)
	res.Medians = map[string]benchFig{}
	for name, f := range parseBench(res.Raw) {
		res.Medians[strings.TrimPrefix(name, "BenchmarkMiddleware/")] = f
	}
	return nil
}

// httpBench is the loopback servers of §9's HTTP measurements: POST
// /wrapped (charge behind nethttp.Middleware over dynamostore) and POST
// /bare (charge and the floor's hand-made calls) on one, and POST /wrapped
// once more on the other, behind a second Middleware: another instance of
// the service, with its own engine. Every request's DynamoDB calls are
// counted under its X-Bench-Tag header.
type httpBench struct {
	url, otherURL string
	client        *http.Client
	tmpl          paymentEvent
	floor         *bare

	mu      sync.Mutex
	counted map[string]*calls        // by tag
	held    map[string]chan struct{} // requests whose handler waits, by key
	started map[string]chan struct{}
}

const benchTagHeader = "X-Bench-Tag"

func startHTTPBench(ctx context.Context, client *dynamodb.Client, table string, tmpl paymentEvent) (*httpBench, func(), error) {
	hb := &httpBench{tmpl: tmpl, floor: &bare{client: client, table: table, prefix: "httpfloor"}, // the engines' prefix
		counted: map[string]*calls{}, held: map[string]chan struct{}{}, started: map[string]chan struct{}{}}
	mw := func() func(http.Handler) http.Handler {
		return nethttp.Middleware(idempotent.New(dynamostore.New(client, table), idempotent.WithLogger(slog.New(slog.DiscardHandler)),
			idempotent.WithPrefix("httpfloor"), idempotent.WithExpiry(time.Hour)))
	}
	mux := http.NewServeMux()
	mux.Handle("POST /wrapped", hb.count(mw()(http.HandlerFunc(hb.charge))))
	mux.Handle("POST /bare", hb.count(http.HandlerFunc(hb.bare)))
	other := http.NewServeMux()
	other.Handle("POST /wrapped", hb.count(mw()(http.HandlerFunc(hb.charge))))

	transport := &http.Transport{MaxIdleConnsPerHost: 8}
	hb.client = &http.Client{Transport: transport, Timeout: 30 * time.Second}
	var stops []func()
	stop := func() {
		transport.CloseIdleConnections()
		for _, s := range stops {
			s()
		}
	}
	for _, s := range []struct {
		h   http.Handler
		url *string
	}{{mux, &hb.url}, {other, &hb.otherURL}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		*s.url = "http://" + ln.Addr().String()
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		})
	}
	return hb, stop, nil
}

// count counts the DynamoDB calls each request makes under its tag.
func (hb *httpBench) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tag := r.Header.Get(benchTagHeader)
		if tag == "" {
			next.ServeHTTP(w, r)
			return
		}
		c := &calls{names: []string{}}
		hb.mu.Lock()
		hb.counted[tag] = c
		hb.mu.Unlock()
		next.ServeHTTP(w, r.WithContext(withCalls(r.Context(), c)))
	})
}

// charge is the handler: it decodes the 1 KB JSON payment, runs
// chargeHandler and answers 201 with its JSON. A key marked with hold waits
// for its release first.
func (hb *httpBench) charge(w http.ResponseWriter, r *http.Request) {
	e, err := decodePayment(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	hb.mu.Lock()
	release, held := hb.held[e.IdempotencyKey]
	started := hb.started[e.IdempotencyKey]
	delete(hb.held, e.IdempotencyKey)
	hb.mu.Unlock()
	if held {
		close(started)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	out, _ := chargeHandler(r.Context(), e)
	body, err := json.Marshal(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// bare is the floor over HTTP: the same handler with the calls an
// idempotent request cannot avoid made by hand (floor.go's claim, and for a
// new key one UpdateItem storing the response: its status, Content-Type
// and body as JSON), a replay answered with that response decoded (a
// hand-written handler stores its status and headers with its body, as it
// cannot know them before the handler ran; §2's floor decodes its stored
// response too). No canonical fingerprint, no header filter, no response
// capture: only what the client would get anyway.
func (hb *httpBench) bare(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 6<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256([]byte(r.Header.Get(nethttp.HeaderIdempotencyKey)))
	id, lease := hb.floor.recordIDOf(sum), randomHex(16)
	// The payload check every keyed request needs (422 for another body):
	// the body's hash, as given, in the store's claim with a fingerprint.
	fp := sha256.Sum256(body)
	old, err := hb.floor.claimAs(ctx, storeClaimFP, id, lease, hex.EncodeToString(fp[:]))
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if old != nil {
		var s bareResponse
		data, _ := old["data"].(*types.AttributeValueMemberB)
		if data == nil || len(data.Value) == 0 || json.Unmarshal(data.Value[1:], &s) != nil { // after complete's one-byte prefix
			http.Error(w, "bare: no stored response", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", s.ContentType)
		w.Header().Set(nethttp.HeaderReplayed, "true")
		w.WriteHeader(s.Status)
		_, _ = w.Write(s.Body)
		return
	}
	var e paymentEvent
	if err := json.Unmarshal(body, &e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, _ := chargeHandler(ctx, e)
	resp, err := json.Marshal(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	stored, err := json.Marshal(bareResponse{Status: http.StatusCreated, ContentType: "application/json", Body: resp})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := hb.floor.complete(ctx, id, lease, stored); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(resp)
}

// bareResponse is the response §9's floor stores: what it answers with.
type bareResponse struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Body        []byte `json:"body"`
}

func decodePayment(r *http.Request) (paymentEvent, error) {
	var e paymentEvent
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return e, err
	}
	return e, json.Unmarshal(body, &e)
}

// answer is a response as the client received it.
type answer struct {
	status   int
	replayed bool
}

// post sends the 1 KB payment with key to path on the first server,
// tagged with tag ("" for none).
func (hb *httpBench) post(ctx context.Context, path, key, tag string) (answer, error) {
	return hb.postTo(ctx, hb.url, path, key, tag)
}

// postTo is post to the server at base.
func (hb *httpBench) postTo(ctx context.Context, base, path, key, tag string) (answer, error) {
	e := hb.tmpl
	e.IdempotencyKey = key
	body, err := json.Marshal(e)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(nethttp.HeaderIdempotencyKey, key)
	if tag != "" {
		req.Header.Set(benchTagHeader, tag)
	}
	resp, err := hb.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, replayed: resp.Header.Get(nethttp.HeaderReplayed) == "true"}, nil
}

// sides are the floor's four paths over HTTP: POST /wrapped and POST /bare,
// each answered 201 (a replay marked Idempotent-Replayed).
func (hb *httpBench) sides() floorSides {
	path := func(p string, replayed bool) side {
		return func(ctx context.Context, key string) error {
			a, err := hb.post(ctx, p, key, "")
			switch {
			case err != nil:
				return err
			case a.status != http.StatusCreated || a.replayed != replayed:
				return fmt.Errorf("%s %s: status %d, replayed %v", p, key, a.status, a.replayed)
			}
			return nil
		}
	}
	return floorSides{wrappedNew: path("/wrapped", false), bareNew: path("/bare", false),
		wrappedReplay: path("/wrapped", true), bareReplay: path("/bare", true)}
}

// runCalls counts the DynamoDB calls of one request per scenario, reps
// times: a new key (2), a replay (1), a duplicate while the first request
// still runs on another instance of the service (1: its claim fails and
// returns the record) and on the same instance (0: it joins the first
// request's claim in memory).
func (hb *httpBench) runCalls(ctx context.Context, reps int) []callsResult {
	run := "hc" + randomHex(6)
	type scenario struct {
		name     string
		target   int
		status   int
		replayed bool
		// dupOn is where the measured duplicate goes while a first request
		// is held in its handler: "this" or the "other" instance ("" for no
		// held first request).
		dupOn string
		first bool // send the key once, completed, before the measured one
	}
	scenarios := []scenario{
		{name: "new key", target: 2, status: http.StatusCreated},
		{name: "replay (completed record)", target: 1, status: http.StatusCreated, replayed: true, first: true},
		{name: "in progress (the first request on another instance)", target: 1, status: http.StatusConflict, dupOn: "other"},
		{name: "in progress (the first request on this instance)", target: 0, status: http.StatusConflict, dupOn: "this"},
	}
	var out []callsResult
	for _, s := range scenarios {
		res := callsResult{Scenario: s.name, Target: s.target, Outcome: fmt.Sprintf("%d", s.status)}
		if s.replayed {
			res.Outcome += ", Idempotent-Replayed"
		}
		for rep := range reps {
			key := fmt.Sprintf("%s-%s-%d", run, strings.ReplaceAll(s.name, " ", "_"), rep)
			tag := key + "/measured"
			problem := func() string {
				base := hb.url
				if s.first {
					if a, err := hb.post(ctx, "/wrapped", key, ""); err != nil || a.status != http.StatusCreated {
						return fmt.Sprintf("the first request: %v %v", a, err)
					}
				}
				if s.dupOn != "" {
					started, release := make(chan struct{}), make(chan struct{})
					hb.mu.Lock()
					hb.held[key], hb.started[key] = release, started
					hb.mu.Unlock()
					done := make(chan error, 1)
					go func() {
						a, err := hb.post(ctx, "/wrapped", key, "")
						if err == nil && a.status != http.StatusCreated {
							err = fmt.Errorf("status %d", a.status)
						}
						done <- err
					}()
					<-started
					defer func() { close(release); <-done }()
					if s.dupOn == "other" {
						base = hb.otherURL
					}
				}
				a, err := hb.postTo(ctx, base, "/wrapped", key, tag)
				switch {
				case err != nil:
					return err.Error()
				case a.status != s.status || a.replayed != s.replayed:
					return fmt.Sprintf("status %d, replayed %v", a.status, a.replayed)
				}
				return ""
			}()
			if problem != "" && res.Problem == "" {
				res.Problem = problem
			}
			hb.mu.Lock()
			c := hb.counted[tag]
			hb.mu.Unlock()
			if c == nil {
				c = &calls{}
				if res.Problem == "" {
					res.Problem = "the request was not counted"
				}
			}
			res.Calls = append(res.Calls, int(c.ops.Load()))
			res.Attempts = append(res.Attempts, int(c.attempts.Load()))
			if rep == 0 {
				c.mu.Lock()
				res.Ops = append([]string(nil), c.names...)
				c.mu.Unlock()
			}
		}
		out = append(out, res)
	}
	return out
}

// runHTTPLoopback measures §9 over HTTP, into res, then the client CPU
// (in processes of their own, ServeHTTP called directly).
func runHTTPLoopback(ctx context.Context, e *env, table string, tmpl paymentEvent, c config, res *httpResult, progress func(string)) error {
	err := func() error {
		hb, stop, err := startHTTPBench(ctx, e.client, table, tmpl)
		if err != nil {
			return err
		}
		defer stop()
		progress(fmt.Sprintf("calls per request, %d repetitions of each scenario", c.CallsReps))
		res.Calls = hb.runCalls(ctx, c.CallsReps)
		progress(fmt.Sprintf("%d runs of %d wrapped and %d bare requests per case, over HTTP", c.FloorRuns, c.FloorN/c.FloorRuns, c.FloorN/c.FloorRuns))
		res.Floor, err = measureFloor(ctx, "h", hb.sides(), c.FloorRuns, c.FloorN, c.FloorWarmup)
		return err
	}()
	if err != nil {
		return err
	}
	if res.CPU, err = runCPUPairs(ctx, e, "http", c, progress); err != nil {
		return err
	}
	res.Instr, res.InstrErr = measureInstr(ctx, e, "http", filepath.Join(c.Build, "callgrind"), c, progress)
	return nil
}
