package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// §8: what idempotency costs the user in DynamoDB capacity. Each driver (the
// Go one and powertools/bench.mjs, with -capacity) asks for
// ReturnConsumedCapacity=TOTAL on every call and sums what DynamoDB reports,
// per operation. A failed conditional write (a replay's claim) is billed but
// reported by nobody: its ConditionalCheckFailedException has no
// ConsumedCapacity field, in DynamoDB Local as in the API. Its units are
// derived from two figures DynamoDB Local does report: the units of the item
// the claim tried to write (the same driver's successful claims) and those of
// the stored item it failed against (a DeleteItem of every stored record after
// the run), by the documented rule for failed conditional writes.

// opCapacity is the consumed capacity of one operation over a phase, as both
// drivers print it.
type opCapacity struct {
	Calls             int     `json:"calls"`
	Reported          int     `json:"reported"`           // calls whose response carried ConsumedCapacity
	ConditionalFailed int     `json:"conditional_failed"` // failed conditional writes: billed, not reported
	Units             float64 `json:"units"`              // the reported CapacityUnits, summed
	Min               float64 `json:"min"`                // of one reported call
	Max               float64 `json:"max"`
}

func (c *opCapacity) add(units float64) {
	if c.Reported == 0 || units < c.Min {
		c.Min = units
	}
	if c.Reported == 0 || units > c.Max {
		c.Max = units
	}
	c.Reported++
	c.Units += units
}

// capacityLog collects the consumed capacity of a client's calls.
type capacityLog struct {
	mu  sync.Mutex
	ops map[string]*opCapacity
}

func newCapacityLog() *capacityLog { return &capacityLog{ops: map[string]*opCapacity{}} }

func (l *capacityLog) record(op string, cc *types.ConsumedCapacity, conditionalFailed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.ops[op]
	if c == nil {
		c = &opCapacity{}
		l.ops[op] = c
	}
	c.Calls++
	if conditionalFailed {
		c.ConditionalFailed++
	}
	if cc != nil && cc.CapacityUnits != nil {
		c.add(*cc.CapacityUnits)
	}
}

// take returns what was recorded since the last take, and starts afresh.
func (l *capacityLog) take() map[string]*opCapacity {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = map[string]*opCapacity{}
	return ops
}

// returnConsumedCapacity is an SDK middleware that sets
// ReturnConsumedCapacity=TOTAL on every item operation (on a copy of the
// caller's input: the store's own input is not touched) and records what the
// response reports in log. It is added to the bench's client only; the store
// is unchanged.
func returnConsumedCapacity(log *capacityLog) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("idembench/consumed-capacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				total := types.ReturnConsumedCapacityTotal
				switch v := in.Parameters.(type) {
				case *dynamodb.PutItemInput:
					c := *v
					c.ReturnConsumedCapacity = total
					in.Parameters = &c
				case *dynamodb.UpdateItemInput:
					c := *v
					c.ReturnConsumedCapacity = total
					in.Parameters = &c
				case *dynamodb.DeleteItemInput:
					c := *v
					c.ReturnConsumedCapacity = total
					in.Parameters = &c
				case *dynamodb.GetItemInput:
					c := *v
					c.ReturnConsumedCapacity = total
					in.Parameters = &c
				}
				out, md, err := next.HandleInitialize(ctx, in)
				var cc *types.ConsumedCapacity
				switch o := out.Result.(type) {
				case *dynamodb.PutItemOutput:
					cc = o.ConsumedCapacity
				case *dynamodb.UpdateItemOutput:
					cc = o.ConsumedCapacity
				case *dynamodb.DeleteItemOutput:
					cc = o.ConsumedCapacity
				case *dynamodb.GetItemOutput:
					cc = o.ConsumedCapacity
				}
				var ccf *types.ConditionalCheckFailedException
				log.record(operationLabel(ctx, in.Parameters), cc, errors.As(err, &ccf))
				return out, md, err
			}), middleware.After)
	}
}

// readOp reports whether op consumes read units (the others here are writes).
func readOp(op string) bool {
	return op == "GetItem" || op == "Query" || op == "Scan" || op == "BatchGetItem"
}

// unitsPerInv is a phase's capacity per invocation: reported write and read
// units, and the write units of its failed conditional writes, each billed
// failedUnits (derivedFailedUnits). unreported counts the calls, other than
// failed conditional writes, whose response carried no ConsumedCapacity (0 in
// a sound run).
type unitsPerInv struct {
	Write, Read, FailedWrite float64
	Unreported               int
}

func (u unitsPerInv) writeTotal() float64 { return u.Write + u.FailedWrite }

func capacityPerInv(ops map[string]*opCapacity, n int, failedUnits float64) unitsPerInv {
	var u unitsPerInv
	if n == 0 {
		return u
	}
	for op, c := range ops {
		if readOp(op) {
			u.Read += c.Units
		} else {
			u.Write += c.Units
			u.FailedWrite += float64(c.ConditionalFailed) * failedUnits
		}
		u.Unreported += c.Calls - c.Reported - c.ConditionalFailed
	}
	u.Write /= float64(n)
	u.Read /= float64(n)
	u.FailedWrite /= float64(n)
	return u
}

// derivedFailedUnits is what a failed conditional write consumes, by the rule
// DynamoDB documents (Developer Guide, "DynamoDB read and write operations"):
// write units for the larger of the item it tried to write and the item in
// the table, each rounded up to 1 KB, so at least 1. Both arguments are write
// units DynamoDB reported for those items.
func derivedFailedUnits(newItemUnits, storedItemUnits float64) float64 {
	return max(newItemUnits, storedItemUnits, 1)
}

// price is DynamoDB's on-demand price, per million request units.
type price struct {
	Region                          string
	WritePerMillion, ReadPerMillion float64 // dollars per million write (read) request units
	AsOf, Source                    string
}

// onDemand is the price the report uses: us-east-1 on-demand, as AWS's
// pricing page published it in 2025 (after the November 2024 reduction).
// The harness does not fetch it; it may have changed since.
var onDemand = price{
	Region:          "us-east-1",
	WritePerMillion: 0.625,
	ReadPerMillion:  0.125,
	AsOf:            "2025",
	Source:          "https://aws.amazon.com/dynamodb/pricing/on-demand/",
}

// perMillion is the cost in dollars of a million invocations that each
// consume u. On demand, one capacity unit DynamoDB reports is one request
// unit billed (standard writes: 1 KB each; strongly consistent reads: 4 KB).
func (p price) perMillion(u unitsPerInv) float64 {
	return u.writeTotal()*p.WritePerMillion + u.Read*p.ReadPerMillion
}

// storedItems describes the records a run left in its table.
type storedItems struct {
	Count                    int
	UnitsMin, UnitsMax       float64 // write units of one item, as DynamoDB Local reported deleting it
	BytesMin, BytesMax       int     // dynamostore.ItemSize, DynamoDB's rule: it explains the units reported, never replaces them
	Attributes               []string
	AttrBytes                map[string]int // the most bytes an attribute took in one record (name and value)
	Unreported, DeleteFailed int
}

// measureStored scans table and deletes every item with
// ReturnConsumedCapacity=TOTAL: a DeleteItem consumes the write units of the
// item it deletes, so DynamoDB Local itself says what each stored record
// weighs. conc deletes run at once.
func measureStored(ctx context.Context, client *dynamodb.Client, table string, conc int) (storedItems, error) {
	var s storedItems
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: &table})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s, fmt.Errorf("scan %s: %w", table, err)
		}
		items = append(items, page.Items...)
	}
	s.AttrBytes = map[string]int{}
	units := make([]float64, len(items))
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	next := make(chan int)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
					TableName:              &table,
					Key:                    map[string]types.AttributeValue{"id": items[i]["id"]},
					ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
				})
				switch {
				case err != nil:
					errs[i] = err
				case out.ConsumedCapacity == nil || out.ConsumedCapacity.CapacityUnits == nil:
					units[i] = -1
				default:
					units[i] = *out.ConsumedCapacity.CapacityUnits
				}
			}
		}()
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
	first := true
	for i, it := range items {
		if errs[i] != nil {
			s.DeleteFailed++
			continue
		}
		for a, v := range it {
			s.AttrBytes[a] = max(s.AttrBytes[a], dynamostore.ItemSize(map[string]types.AttributeValue{a: v}))
		}
		b := dynamostore.ItemSize(it)
		if units[i] < 0 {
			s.Unreported++
			continue
		}
		if first || units[i] < s.UnitsMin {
			s.UnitsMin = units[i]
		}
		if first || units[i] > s.UnitsMax {
			s.UnitsMax = units[i]
		}
		if first || b < s.BytesMin {
			s.BytesMin = b
		}
		if first || b > s.BytesMax {
			s.BytesMax = b
		}
		first = false
		s.Count++
	}
	s.Attributes = slices.Sorted(maps.Keys(s.AttrBytes))
	if s.DeleteFailed > 0 {
		return s, fmt.Errorf("measuring the stored items of %s: %d deletes failed, the first: %w", table, s.DeleteFailed, firstErr(errs))
	}
	return s, nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// capacityRun is one driver run of §8: an implementation, a response size,
// its phases and the records it left.
type capacityRun struct {
	Impl          string
	Pad           int // characters of the response's receipt field (0: none)
	ResponseBytes int // the response's JSON
	New, Replay   phaseResult
	Stored        storedItems
}

// claimOp labels dynamostore's claim, a PutItem that asks for the old item
// (ReturnValues=ALL_OLD), apart from other PutItems (Powertools claims with
// a PutItem that does not ask for it).
const claimOp = "PutItem(claim)"

// operationLabel is the operation's name, with dynamostore's claim told apart.
func operationLabel(ctx context.Context, params any) string {
	if p, ok := params.(*dynamodb.PutItemInput); ok && p.ReturnValues == types.ReturnValueAllOld {
		return claimOp
	}
	return awsmiddleware.GetOperationName(ctx)
}

// claimUnits is what one successful claim of a new key reported: a PutItem
// (Powertools) or dynamostore's claiming PutItem.
func (r capacityRun) claimUnits() float64 {
	for _, op := range []string{"PutItem", claimOp} {
		if c := r.New.Capacity[op]; c != nil && c.Reported > 0 {
			return c.Max
		}
	}
	return 0
}

// failedUnits is what one failed claim against a stored record consumes.
func (r capacityRun) failedUnits() float64 {
	return derivedFailedUnits(r.claimUnits(), r.Stored.UnitsMax)
}

func (r capacityRun) perInv(phase string) unitsPerInv {
	x := r.New
	if phase == "replay" {
		x = r.Replay
	}
	return capacityPerInv(x.Capacity, x.N, r.failedUnits())
}

// problem says what makes the run's figures unsound, if anything.
func (r capacityRun) problem() string {
	for _, x := range []phaseResult{r.New, r.Replay} {
		if u := capacityPerInv(x.Capacity, x.N, 0); u.Unreported > 0 {
			return fmt.Sprintf("%d calls of the %s phase reported no consumed capacity", u.Unreported, x.Phase)
		}
	}
	if r.claimUnits() == 0 {
		return "no claim reported its consumed capacity"
	}
	if r.Stored.Count == 0 || r.Stored.Unreported > 0 {
		return "the stored records' sizes were not measured"
	}
	return ""
}

// opsSummary is "PutItem 1.00 + UpdateItem 1.00" (units per invocation, per
// operation), with failed conditional writes marked.
func opsSummary(x phaseResult, failedUnits float64) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(x.Capacity)) {
		c := x.Capacity[op]
		s := fmt.Sprintf("%s %s", op, fmtUnits(c.Units/float64(x.N)))
		if c.ConditionalFailed > 0 {
			s = fmt.Sprintf("%s (%d of %d calls failed their condition: %s reported, %s derived)", op, c.ConditionalFailed, c.Calls,
				fmtUnits(c.Units/float64(x.N)), fmtUnits(float64(c.ConditionalFailed)*failedUnits/float64(x.N)))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " + ")
}

func fmtUnits(u float64) string {
	if u == math.Trunc(u) {
		return strconv.FormatFloat(u, 'f', 0, 64)
	}
	return strconv.FormatFloat(u, 'f', 2, 64)
}

// responseTarget is the size of §8's larger response, in bytes of JSON: the
// small response plus a receipt that brings it to about 1 KB.
const responseTarget = 1024

// responseBytes is the size of the JSON response to tmpl with a receipt of
// pad characters, for a key shaped as the drivers' keys of the new phase.
func responseBytes(tmpl paymentEvent, pad int) int {
	e := tmpl
	e.IdempotencyKey = "g" + strings.Repeat("0", 12) + "-new-100"
	r, _ := paddedCharge(pad)(context.Background(), e)
	b, _ := json.Marshal(r)
	return len(b)
}

// padFor is the receipt length that makes the response about target bytes.
func padFor(tmpl paymentEvent, target int) int {
	return max(target-responseBytes(tmpl, 0)-len(`,"receipt":""`), 1)
}

// runCapacity runs each driver once per response size with -capacity: n new
// keys and their replays at concurrency conc, then measures the records each
// left. Powertools and idemkit alternate which goes first.
func runCapacity(ctx context.Context, e *env, tmpl paymentEvent, n, conc, warmup int, progress func(string)) ([]capacityRun, error) {
	var out []capacityRun
	for i, pad := range []int{0, padFor(tmpl, responseTarget)} {
		order := []string{"idemkit", "powertools"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, impl := range order {
			run := capacityRun{Impl: impl, Pad: pad, ResponseBytes: responseBytes(tmpl, pad)}
			progress(fmt.Sprintf("%s, %d-byte response: %d new keys and their replays", impl, run.ResponseBytes, n))
			phases, err := e.driverThen(ctx, impl, func(ctx context.Context, table string) error {
				var err error
				run.Stored, err = measureStored(ctx, e.client, table, 8)
				return err
			}, "-n", strconv.Itoa(n), "-c", strconv.Itoa(conc), "-warmup", strconv.Itoa(warmup),
				"-phases", "new,replay", "-capacity", "-pad", strconv.Itoa(pad))
			if err != nil {
				return out, err
			}
			for _, p := range phases {
				switch p.Phase {
				case "new":
					run.New = p
				case "replay":
					run.Replay = p
				}
			}
			if run.New.N == 0 || run.Replay.N == 0 {
				return out, fmt.Errorf("%s driver: phases missing from its output", impl)
			}
			out = append(out, run)
		}
	}
	return out, nil
}
