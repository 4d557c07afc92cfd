package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
)

// §10: the API Gateway front door (apigateway.WrapV2, and WrapV1 for the
// calls), called as the Lambda runtime calls a handler, over DynamoDB
// Local: its distance from the floor (§2's method), its client CPU against
// the floor's (§2's children) and its calls per request.

// apigwEventFile is the HTTP API (payload 2.0) sample event whose shape the
// benchmark's events take: headers, a JWT authorizer, the request context.
const apigwEventFile = "events/payments-new.json"

// apigwResult is §10's measurements.
type apigwResult struct {
	Floor    []floorResult
	CPU      cpuPairs
	Instr    instrPairs // client instructions, the CPU drivers under callgrind
	InstrErr string     // why Instr was not measured ("" if it was)
	Calls    []callsResult
}

// apigwDoor is the wrapped and the bare Lambda handler of §10, and the
// events they are sent.
type apigwDoor struct {
	tmpl    events.APIGatewayV2HTTPRequest // the sample event, with the 1 KB payment as its body
	payment paymentEvent
	wrapped func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	v1      func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	floor   *bare
}

// newAPIGWDoor builds §10's handlers over table: WrapV2 (and WrapV1) over
// dynamostore through engine, and the bare handler over the same client.
func newAPIGWDoor(root string, client *dynamodb.Client, table string, engine *idempotent.Engine, payment paymentEvent) (*apigwDoor, error) {
	b, err := os.ReadFile(root + "/" + apigwEventFile)
	if err != nil {
		return nil, err
	}
	d := &apigwDoor{payment: payment, floor: &bare{client: client, table: table}}
	if err := json.Unmarshal(b, &d.tmpl); err != nil {
		return nil, fmt.Errorf("%s: %w", apigwEventFile, err)
	}
	d.wrapped = apigateway.WrapV2(engine, apigwCharge)
	d.v1 = apigateway.WrapV1(engine, func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		out, err := apigwCharge(ctx, events.APIGatewayV2HTTPRequest{Body: ev.Body})
		return events.APIGatewayProxyResponse{StatusCode: out.StatusCode, Headers: out.Headers, Body: out.Body}, err
	})
	return d, nil
}

// apigwCharge is the handler behind the door: it decodes the 1 KB JSON
// payment from the body, runs chargeHandler and answers 201 with its JSON.
func apigwCharge(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var e paymentEvent
	if err := json.Unmarshal([]byte(ev.Body), &e); err != nil {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
	}
	out, _ := chargeHandler(ctx, e)
	body, err := json.Marshal(out)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated,
		Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)}, nil
}

// event is the sample event carrying the 1 KB payment with key, in its
// body and its Idempotency-Key header.
func (d *apigwDoor) event(key string) (events.APIGatewayV2HTTPRequest, error) {
	p := d.payment
	p.IdempotencyKey = key
	body, err := json.Marshal(p)
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	ev := d.tmpl
	ev.Headers = make(map[string]string, len(d.tmpl.Headers))
	for k, v := range d.tmpl.Headers {
		ev.Headers[k] = v
	}
	ev.Headers["idempotency-key"] = key
	ev.Headers["content-length"] = strconv.Itoa(len(body))
	ev.Body = string(body)
	return ev, nil
}

// eventV1 is event as a REST API (payload 1.0) event.
func (d *apigwDoor) eventV1(key string) (events.APIGatewayProxyRequest, error) {
	v2, err := d.event(key)
	if err != nil {
		return events.APIGatewayProxyRequest{}, err
	}
	return events.APIGatewayProxyRequest{HTTPMethod: v2.RequestContext.HTTP.Method, Resource: v2.RawPath, Path: v2.RawPath,
		Headers: v2.Headers, Body: v2.Body,
		RequestContext: events.APIGatewayProxyRequestContext{AccountID: v2.RequestContext.AccountID, APIID: v2.RequestContext.APIID,
			Stage: "prod", RequestID: v2.RequestContext.RequestID, HTTPMethod: v2.RequestContext.HTTP.Method, Path: v2.RawPath,
			Identity: events.APIGatewayRequestIdentity{SourceIP: v2.RequestContext.HTTP.SourceIP}},
	}, nil
}

// bareHandler is the floor behind API Gateway: the handler with the calls
// an idempotent request cannot avoid made by hand, as §9's bare does
// (floor.go's claim with the SHA-256 of the raw body as the fingerprint,
// and for a new key one UpdateItem storing the handler's response, the
// events response as JSON), a replay answered with that response decoded:
// a hand-written handler stores its status and headers with its body, as
// it cannot know them before the handler ran (§2's floor decodes its
// stored response too).
func (d *apigwDoor) bareHandler(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	sum := sha256.Sum256([]byte(ev.Headers["idempotency-key"]))
	id, lease := d.floor.recordIDOf(sum), randomHex(16)
	fp := sha256.Sum256([]byte(ev.Body))
	old, err := d.floor.claimAs(ctx, storeClaimFP, id, lease, hex.EncodeToString(fp[:]))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusServiceUnavailable}, nil
	}
	if old != nil {
		var out events.APIGatewayV2HTTPResponse
		data, _ := old["data"].(*types.AttributeValueMemberB)
		if data == nil || len(data.Value) == 0 || json.Unmarshal(data.Value[1:], &out) != nil { // after complete's one-byte prefix
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusInternalServerError}, nil
		}
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		out.Headers[nethttp.HeaderReplayed] = "true"
		return out, nil
	}
	out, err := apigwCharge(ctx, ev)
	if err != nil || out.StatusCode != http.StatusCreated {
		return out, err
	}
	stored, err := json.Marshal(out)
	if err != nil {
		return out, err
	}
	if err := d.floor.complete(ctx, id, lease, stored); err != nil {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusServiceUnavailable}, nil
	}
	return out, nil
}

// checkAnswer is nil when out is the handler's 201 (a replay when
// replayed).
func checkAnswer(status int, headers map[string]string, replayed bool) error {
	got := false
	for k, v := range headers {
		if strings.EqualFold(k, nethttp.HeaderReplayed) {
			got = v == "true"
		}
	}
	if status != http.StatusCreated || got != replayed {
		return fmt.Errorf("status %d, replayed %v", status, got)
	}
	return nil
}

// sides are the floor's four paths through this door, sent events built
// before they are timed.
func (d *apigwDoor) sides() floorSides {
	evs := map[string]events.APIGatewayV2HTTPRequest{}
	path := func(h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), replayed bool) side {
		return func(ctx context.Context, key string) error {
			out, err := h(ctx, evs[key])
			if err != nil {
				return err
			}
			return checkAnswer(out.StatusCode, out.Headers, replayed)
		}
	}
	return floorSides{
		wrappedNew: path(d.wrapped, false), bareNew: path(d.bareHandler, false),
		wrappedReplay: path(d.wrapped, true), bareReplay: path(d.bareHandler, true),
		prepare: func(keys []string) error {
			clear(evs)
			for _, k := range keys {
				ev, err := d.event(k)
				if err != nil {
					return err
				}
				evs[k] = ev
			}
			return nil
		},
	}
}

// runCalls counts the DynamoDB calls of one request per scenario, reps
// times: a new key (2) and its replay (1), for payload 2.0 and 1.0.
func (d *apigwDoor) runCalls(ctx context.Context, reps int) []callsResult {
	run := "ac" + randomHex(6)
	type scenario struct {
		name     string
		target   int
		v1       bool
		replayed bool
	}
	var out []callsResult
	for i, s := range []scenario{
		{"WrapV2 (HTTP API, payload 2.0): new key", 2, false, false},
		{"WrapV2 (HTTP API, payload 2.0): replay (completed record)", 1, false, true},
		{"WrapV1 (REST API, payload 1.0): new key", 2, true, false},
		{"WrapV1 (REST API, payload 1.0): replay (completed record)", 1, true, true},
	} {
		res := callsResult{Scenario: s.name, Target: s.target, Outcome: "201"}
		if s.replayed {
			res.Outcome += ", Idempotent-Replayed"
		}
		for rep := range reps {
			key := fmt.Sprintf("%s-%d-%d", run, i, rep)
			send := func(c *calls) error {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if c != nil {
					cctx = withCalls(cctx, c)
				}
				if s.v1 {
					ev, err := d.eventV1(key)
					if err != nil {
						return err
					}
					out, err := d.v1(cctx, ev)
					if err != nil {
						return err
					}
					return checkAnswer(out.StatusCode, out.Headers, s.replayed && c != nil)
				}
				ev, err := d.event(key)
				if err != nil {
					return err
				}
				out, err := d.wrapped(cctx, ev)
				if err != nil {
					return err
				}
				return checkAnswer(out.StatusCode, out.Headers, s.replayed && c != nil)
			}
			var err error
			if s.replayed {
				err = send(nil) // the first request, not counted
			}
			c := &calls{names: []string{}}
			if err == nil {
				err = send(c)
			}
			if err != nil && res.Problem == "" {
				res.Problem = err.Error()
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

// runAPIGW measures §10: calls, then the floor, in process; then the CPU
// children.
func runAPIGW(ctx context.Context, e *env, table string, tmpl paymentEvent, c config, progress func(string)) (*apigwResult, error) {
	engine := idempotent.New(dynamostore.New(e.client, table), idempotent.WithLogger(slog.New(slog.DiscardHandler)),
		idempotent.WithPrefix("apigw"), idempotent.WithExpiry(time.Hour))
	d, err := newAPIGWDoor(e.root, e.client, table, engine, tmpl)
	if err != nil {
		return nil, err
	}
	d.floor.prefix = "apigw" // the engine's
	res := &apigwResult{}
	progress(fmt.Sprintf("calls per request, %d repetitions of each scenario", c.CallsReps))
	res.Calls = d.runCalls(ctx, c.CallsReps)
	progress(fmt.Sprintf("%d runs of %d wrapped and %d bare events per case", c.FloorRuns, c.FloorN/c.FloorRuns, c.FloorN/c.FloorRuns))
	if res.Floor, err = measureFloor(ctx, "a", d.sides(), c.FloorRuns, c.FloorN, c.FloorWarmup); err != nil {
		return res, err
	}
	if res.CPU, err = runCPUPairs(ctx, e, "apigw", c, progress); err != nil {
		return res, err
	}
	res.Instr, res.InstrErr = measureInstr(ctx, e, "apigw", filepath.Join(c.Build, "callgrind"), c, progress)
	return res, nil
}
