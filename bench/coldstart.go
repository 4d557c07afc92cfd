package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/internal/localddb"
)

// lambdaFunc is a function of the cold-start benchmark.
type lambdaFunc struct {
	Name string
	Pkg  string // the main package, relative to the repository
	// event returns the invocation event of one cold start (fresh keys, so
	// every start does the full claim, side effect and completion) and checks
	// the function's answer.
	event func(root string) ([]byte, error)
	check func(answer []byte) error
}

// lambdaBuildFlags are the sample functions' build flags (provided.al2023).
var lambdaBuildFlags = []string{"-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w"}

func coldStartFuncs() []lambdaFunc {
	return []lambdaFunc{
		{Name: "hello", Pkg: "./bench/hello",
			event: func(string) ([]byte, error) { return []byte(`{"hello":"world"}`), nil },
			check: func(a []byte) error { return expectJSON(a, `"hello"`) }},
		{Name: "hello+dynamodb", Pkg: "./bench/hellodynamodb",
			event: func(string) ([]byte, error) { return []byte(`{"hello":"world"}`), nil },
			check: func(a []byte) error { return expectJSON(a, `"hello"`) }},
		{Name: "payments", Pkg: "./functions/payments/cmd/bootstrap", event: paymentsEvent,
			check: func(a []byte) error { return expectJSON(a, `"statusCode":201`) }},
		{Name: "orders", Pkg: "./functions/orders/cmd/bootstrap", event: ordersEvent,
			check: expectOrdersFailures},
	}
}

// expectOrdersFailures checks the orders function's answer to
// events/orders-batch.json: exactly the poison and the invalid message fail,
// so every other order was reserved.
func expectOrdersFailures(answer []byte) error {
	var resp struct {
		Failures []struct {
			ID string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(answer, &resp); err != nil {
		return fmt.Errorf("unexpected answer %.300s: %w", answer, err)
	}
	var ids []string
	for _, f := range resp.Failures {
		ids = append(ids, f.ID)
	}
	slices.Sort(ids)
	want := []string{"3e7c9f4b-0d5a-4b1c-8e6f-8a9b0c1d2e34", "4f8d0a5c-1e6b-4c2d-9f7a-9b0c1d2e3f45"}
	if !slices.Equal(ids, want) {
		return fmt.Errorf("orders answered failures %q, want %q (the poison and the invalid message)", ids, want)
	}
	return nil
}

func expectJSON(answer []byte, want string) error {
	if !json.Valid(answer) || !strings.Contains(string(answer), want) {
		return fmt.Errorf("unexpected answer %.300s (want %s)", answer, want)
	}
	return nil
}

// paymentsEvent is events/payments-new.json with a fresh Idempotency-Key.
func paymentsEvent(root string) ([]byte, error) {
	var ev map[string]any
	if err := readJSON(filepath.Join(root, "events", "payments-new.json"), &ev); err != nil {
		return nil, err
	}
	headers, ok := ev["headers"].(map[string]any)
	if !ok {
		return nil, errors.New("payments-new.json: no headers")
	}
	headers["idempotency-key"] = uuid()
	return json.Marshal(ev)
}

// ordersEvent is events/orders-batch.json with each orderId replaced by a
// fresh one (the in-batch duplicate stays a duplicate; the poison message
// stays poison).
func ordersEvent(root string) ([]byte, error) {
	var ev struct {
		Records []map[string]any `json:"Records"`
	}
	if err := readJSON(filepath.Join(root, "events", "orders-batch.json"), &ev); err != nil {
		return nil, err
	}
	fresh := map[string]string{}
	for _, rec := range ev.Records {
		body, _ := rec["body"].(string)
		var order map[string]any
		if json.Unmarshal([]byte(body), &order) != nil {
			continue
		}
		if id, ok := order["orderId"].(string); ok {
			if fresh[id] == "" {
				fresh[id] = id + "-" + randomHex(6)
			}
			order["orderId"] = fresh[id]
		}
		b, _ := json.Marshal(order)
		rec["body"] = string(b)
	}
	return json.Marshal(ev)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func uuid() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

// buildFunc builds f for linux/goarch into dir/<name>/bootstrap and returns the path.
func buildFunc(ctx context.Context, root, dir, goarch string, f lambdaFunc) (string, error) {
	out := filepath.Join(dir, f.Name, "bootstrap")
	args := append(append([]string{"build"}, lambdaBuildFlags...), "-o", out, f.Pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s for %s: %w\n%s", f.Name, goarch, err, b)
	}
	return out, nil
}

// coldStart is one measured start.
type coldStart struct {
	Init, FirstResponse time.Duration
}

// coldStartResult is the measurements of one function.
type coldStartResult struct {
	Name, Pkg          string
	SizeArm64          int64
	Starts             []coldStart
	Err                string
	hostBinary, answer string
	// InitClock is the median over a few starts under GODEBUG=inittrace=1 of
	// the package initializers' run time, by package group (ms).
	InitClock map[string]float64
}

func (r *coldStartResult) medians() (init, first spread) {
	var i, f []float64
	for _, s := range r.Starts {
		i = append(i, float64(s.Init)/float64(time.Millisecond))
		f = append(f, float64(s.FirstResponse)/float64(time.Millisecond))
	}
	return spreadOf(i), spreadOf(f)
}

// runColdStarts builds the functions (arm64 for their sizes, the host
// architecture to run them) and starts each reps times, interleaved, under a
// Runtime API of ours, with DynamoDB Local behind them.
func runColdStarts(ctx context.Context, e *env, buildDir string, reps int, progress func(string)) ([]*coldStartResult, error) {
	funcs := coldStartFuncs()
	results := make([]*coldStartResult, len(funcs))
	for i, f := range funcs {
		r := &coldStartResult{Name: f.Name, Pkg: f.Pkg}
		results[i] = r
		progress("build " + f.Name + " (linux/arm64, linux/" + runtime.GOARCH + ")")
		arm, err := buildFunc(ctx, e.root, filepath.Join(buildDir, "arm64"), "arm64", f)
		if err != nil {
			r.Err = err.Error()
			continue
		}
		if st, err := os.Stat(arm); err == nil {
			r.SizeArm64 = st.Size()
		}
		if r.hostBinary, err = buildFunc(ctx, e.root, filepath.Join(buildDir, runtime.GOARCH), runtime.GOARCH, f); err != nil {
			r.Err = err.Error()
		}
	}

	tables := localddb.UniqueTables("idembench-coldstart")
	if err := localddb.CreateTables(ctx, e.client, tables); err != nil {
		return results, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = localddb.DeleteTables(dctx, e.client, tables)
	}()
	// The orders function reserves stock in its completion's transaction:
	// the sample batch's SKUs get enough for every start.
	for _, sku := range []string{"SKU-RED-MUG", "SKU-BLUE-CAP"} {
		if _, err := e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &tables.Inventory,
			Key:                       map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: sku}},
			UpdateExpression:          aws.String("ADD #stock :units"),
			ExpressionAttributeNames:  map[string]string{"#stock": orders.StockAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":units": &types.AttributeValueMemberN{Value: "1000000"}},
		}); err != nil {
			return results, fmt.Errorf("stock %s: %w", sku, err)
		}
	}
	home, err := os.MkdirTemp("", "idembench-home")
	if err != nil {
		return results, err
	}
	defer os.RemoveAll(home)

	progress(fmt.Sprintf("%d interleaved starts of each function", reps))
	for rep := -1; rep < reps; rep++ { // rep -1 warms the page cache, unmeasured
		for k := range funcs {
			i := (k + max(rep, 0)) % len(funcs) // rotate who goes first
			f, r := funcs[i], results[i]
			if r.Err != "" {
				continue
			}
			s, answer, err := startOnce(ctx, e, r.hostBinary, f, tables, home)
			if err == nil {
				err = f.check(answer)
			}
			if err != nil {
				r.Err = err.Error()
				continue
			}
			r.answer = string(answer)
			if rep >= 0 {
				r.Starts = append(r.Starts, s)
			}
		}
	}
	progress("package init times (GODEBUG=inittrace=1)")
	for i, f := range funcs {
		if r := results[i]; r.Err == "" {
			r.InitClock = initTrace(ctx, e, r.hostBinary, f, tables, home, 7)
		}
	}
	return results, nil
}

// initTrace starts binary runs times with GODEBUG=inittrace=1 (no Runtime
// API: it fails once main reaches lambda.Start, after every package init) and
// returns the median init time of each package group, and of all as "total".
func initTrace(ctx context.Context, e *env, binary string, f lambdaFunc, tables localddb.Tables, home string, runs int) map[string]float64 {
	samples := map[string][]float64{}
	for range runs {
		cmd := exec.CommandContext(ctx, binary)
		cmd.Env = append(lambdaEnv(f, "127.0.0.1:1", tables, home), "GODEBUG=inittrace=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		_ = cmd.Run() // it exits with an error: there is no Runtime API
		sums := map[string]float64{}
		for _, line := range strings.Split(stderr.String(), "\n") {
			// init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs
			fl := strings.Fields(line)
			if len(fl) < 7 || fl[0] != "init" || fl[6] != "clock," {
				continue
			}
			ms, err := strconv.ParseFloat(fl[4], 64)
			if err != nil {
				continue
			}
			sums[packageGroup(fl[1])] += ms
			sums["total"] += ms
		}
		for g, v := range sums {
			samples[g] = append(samples[g], v)
		}
	}
	out := map[string]float64{}
	for g, v := range samples {
		out[g] = spreadOf(v).Median
	}
	return out
}

// packageGroup names the group a package's init time is reported under.
func packageGroup(pkg string) string {
	const sdk = "github.com/aws/aws-sdk-go-v2/"
	switch {
	case !strings.Contains(strings.SplitN(pkg, "/", 2)[0], "."):
		return "standard library"
	case strings.HasPrefix(pkg, sdk+"service/"):
		name := strings.SplitN(strings.TrimPrefix(pkg, sdk+"service/"), "/", 2)[0]
		if name == "internal" {
			return "aws-sdk-go-v2 (other)"
		}
		return "aws-sdk-go-v2/service/" + name
	case strings.HasPrefix(pkg, sdk+"config"), strings.HasPrefix(pkg, sdk+"credentials"), strings.HasPrefix(pkg, sdk+"feature/ec2/imds"), strings.HasPrefix(pkg, sdk+"internal/ini"):
		return "aws-sdk-go-v2/config and credentials"
	case strings.HasPrefix(pkg, sdk):
		return "aws-sdk-go-v2 (other)"
	case strings.HasPrefix(pkg, "github.com/aws/smithy-go"):
		return "smithy-go"
	case strings.HasPrefix(pkg, "github.com/aws/aws-lambda-go"):
		return "aws-lambda-go"
	case strings.HasPrefix(pkg, "github.com/idemkit/idemkit"):
		return "idemkit"
	}
	return "other modules"
}

// lambdaEnv is the environment Lambda and the sample stack give a function.
func lambdaEnv(f lambdaFunc, runtimeAPI string, tables localddb.Tables, home string) []string {
	return []string{
		"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "TZ=:UTC",
		"AWS_LAMBDA_RUNTIME_API=" + runtimeAPI,
		"AWS_LAMBDA_FUNCTION_NAME=" + f.Name, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024", "AWS_LAMBDA_LOG_LEVEL=INFO",
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + localddb.Endpoint(),
		"IDEMPOTENCY_TABLE=" + tables.Idempotency, "PAYMENTS_TABLE=" + tables.Payments, "INVENTORY_TABLE=" + tables.Inventory,
	}
}

// startOnce starts binary as Lambda would, with the environment the sample
// stack gives it, serves it one invocation and kills it.
func startOnce(ctx context.Context, e *env, binary string, f lambdaFunc, tables localddb.Tables, home string) (coldStart, []byte, error) {
	event, err := f.event(e.root)
	if err != nil {
		return coldStart{}, nil, err
	}
	api, err := startRuntimeAPI(event, "arn:aws:lambda:us-east-1:000000000000:function:"+f.Name)
	if err != nil {
		return coldStart{}, nil, err
	}
	defer api.close()
	cmd := exec.Command(binary)
	cmd.Dir = filepath.Dir(binary)
	cmd.Env = lambdaEnv(f, api.addr(), tables, home)
	var stderr strings.Builder
	cmd.Stderr = &stderr // stdout (the functions' JSON logs) is discarded
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return coldStart{}, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	select {
	case <-api.done:
	case err := <-exited:
		exited <- err
		return coldStart{}, nil, fmt.Errorf("%s exited before answering: %v\n%s", f.Name, err, stderr.String())
	case <-time.After(15 * time.Second):
		return coldStart{}, nil, fmt.Errorf("%s did not answer within 15 s\n%s", f.Name, stderr.String())
	case <-ctx.Done():
		return coldStart{}, nil, ctx.Err()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.kind != "response" {
		return coldStart{}, nil, fmt.Errorf("%s posted %s: %s", f.Name, api.kind, api.answer)
	}
	return coldStart{Init: api.nextAt.Sub(start), FirstResponse: api.doneAt.Sub(start)}, api.answer, nil
}
