package reliability_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// faultKind is what the faulty transport does to a request.
type faultKind int

const (
	// throttling answers 400 ThrottlingException without sending the request.
	throttling faultKind = iota + 1
	// provisioned answers 400 ProvisionedThroughputExceededException.
	provisioned
	// serverError answers 500 InternalServerError.
	serverError
	// unavailable answers 503 ServiceUnavailable.
	unavailable
	// stall holds the request, unsent, until its context ends (a per-attempt
	// timeout, the invocation's deadline or a cancellation).
	stall
	// lostResponse sends the request (DynamoDB applies it), then holds the
	// response until the request's context ends: the write happened but the
	// caller never learns it.
	lostResponse
	// appliedThenError sends the request (DynamoDB applies it), then answers
	// 500 InternalServerError: the write happened and the caller is told it
	// failed.
	appliedThenError
	// held keeps the request, unsent, and answers 500 InternalServerError;
	// sendHeld sends it later, as a network that delivers a request late.
	held
	// accessDenied answers 400 AccessDeniedException without sending the request.
	accessDenied
	// unknownOperation answers 400 UnknownOperationException, as dynalite
	// answers TransactWriteItems.
	unknownOperation
)

func (k faultKind) String() string {
	return [...]string{"none", "throttling", "provisioned", "serverError", "unavailable", "stall", "lostResponse",
		"appliedThenError", "held", "accessDenied", "unknownOperation"}[k]
}

// claimOp is the operation name under which faultyTransport arms and counts
// the idempotency store's claims: a PutItem that asks for
// ReturnValues=ALL_OLD, which no other PutItem does (the samples' own
// writes, such as the payments ledger's), so "PutItem" keeps meaning those.
// The rare second write of a claim over a lapsed record holding steps is
// such a PutItem too.
const claimOp = "PutItem(claim)"

// faultyTransport is an http.RoundTripper in front of the real DynamoDB
// Local. Faults are armed per operation (the X-Amz-Target's name, such as
// PutItem, or claimOp): the next n requests for it get the fault, the rest pass. It
// counts the requests (attempts) of each operation, faulted or not, so
// tests can see the SDK's retryer at work. Safe for concurrent use.
type faultyTransport struct {
	base http.RoundTripper

	mu       sync.Mutex
	armed    map[string]*armedFault
	attempts map[string]int
	stalls   chan string // receives the operation of each stall as it begins
	held     []*http.Request
}

// armedFault is what the next requests of an operation get: the queued
// faults in order, then forever (0: pass).
type armedFault struct {
	queue   []faultKind
	forever faultKind
}

func newFaultyTransport() *faultyTransport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 64
	return &faultyTransport{
		base:     base,
		armed:    map[string]*armedFault{},
		attempts: map[string]int{},
		stalls:   make(chan string, 64),
	}
}

// client is the *http.Client to give the SDK; timeout, if positive, bounds
// each attempt (http.Client.Timeout), which the SDK retries as a timeout.
func (f *faultyTransport) client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: f, Timeout: timeout}
}

// arm makes the next n requests of op fail with kind, after the faults
// armed before on op; n < 0 makes every later request fail so, until
// disarmed.
func (f *faultyTransport) arm(op string, kind faultKind, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.armed[op]
	if a == nil {
		a = &armedFault{}
		f.armed[op] = a
	}
	if n < 0 {
		a.forever = kind
		return
	}
	for range n {
		a.queue = append(a.queue, kind)
	}
}

// disarm removes every fault.
func (f *faultyTransport) disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.armed)
}

// count returns how many requests of op were seen.
func (f *faultyTransport) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[op]
}

// reset removes every fault and zeroes the counts, for a subtest that
// shares its env with others.
func (f *faultyTransport) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.armed)
	clear(f.attempts)
}

// next returns the fault for a request of op, and counts it.
func (f *faultyTransport) next(op string) faultKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[op]++
	a := f.armed[op]
	if a == nil {
		return 0
	}
	if len(a.queue) > 0 {
		k := a.queue[0]
		a.queue = a.queue[1:]
		return k
	}
	return a.forever
}

func (f *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if op == "PutItem" && isClaim(req) {
		op = claimOp
	}
	kind := f.next(op)
	switch kind {
	case 0:
		return f.base.RoundTrip(req)
	case throttling:
		return errorResponse(req, http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput."), nil
	case provisioned:
		return errorResponse(req, http.StatusBadRequest, "ProvisionedThroughputExceededException",
			"The level of configured provisioned throughput for the table was exceeded."), nil
	case serverError:
		return errorResponse(req, http.StatusInternalServerError, "InternalServerError", "Internal server error"), nil
	case unavailable:
		return errorResponse(req, http.StatusServiceUnavailable, "ServiceUnavailable", "Service unavailable"), nil
	case stall:
		closeBody(req)
		f.signalStall(op)
		<-req.Context().Done()
		return nil, req.Context().Err()
	case appliedThenError:
		resp, err := f.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return errorResponse(req, http.StatusInternalServerError, "InternalServerError", "Internal server error"), nil
	case held:
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		late := req.Clone(context.Background())
		late.Body, late.GetBody = io.NopCloser(bytes.NewReader(body)), nil
		f.mu.Lock()
		f.held = append(f.held, late)
		f.mu.Unlock()
		return errorResponse(req, http.StatusInternalServerError, "InternalServerError", "Internal server error"), nil
	case accessDenied:
		return errorResponse(req, http.StatusBadRequest, "AccessDeniedException", "User is not authorized to perform: dynamodb:TransactWriteItems"), nil
	case unknownOperation:
		return errorResponse(req, http.StatusBadRequest, "UnknownOperationException", ""), nil
	case lostResponse:
		resp, err := f.base.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		f.signalStall(op)
		<-req.Context().Done()
		return nil, req.Context().Err()
	default:
		panic(fmt.Sprintf("unknown fault %d", kind))
	}
}

// sendHeld sends the requests held so far, as they were, and returns
// DynamoDB's answers: status and body.
func (f *faultyTransport) sendHeld() ([]int, []string, error) {
	f.mu.Lock()
	reqs := f.held
	f.held = nil
	f.mu.Unlock()
	var (
		codes  []int
		bodies []string
	)
	for _, req := range reqs {
		resp, err := f.base.RoundTrip(req)
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, nil, err
		}
		codes, bodies = append(codes, resp.StatusCode), append(bodies, string(b))
	}
	return codes, bodies, nil
}

func (f *faultyTransport) signalStall(op string) {
	select {
	case f.stalls <- op:
	default:
	}
}

// isClaim reports whether a PutItem request is a claim (see claimOp). It
// reads the body and puts it back for the request to be sent.
func isClaim(req *http.Request) bool {
	if req.Body == nil {
		return false
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && bytes.Contains(body, []byte(`"ReturnValues":"ALL_OLD"`))
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// errorResponse is a DynamoDB JSON-protocol error answer.
func errorResponse(req *http.Request, status int, code, message string) *http.Response {
	closeBody(req)
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, message)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":     {"application/x-amz-json-1.0"},
			"X-Amzn-Requestid": {"idemkit-fault"},
		},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
