package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestDerivedFailedUnits(t *testing.T) {
	for _, c := range []struct{ claim, stored, want float64 }{
		{1, 1, 1},
		{1, 2, 2}, // the stored record is the larger: it counts
		{3, 2, 3}, // the item being written is the larger: it counts
		{0, 0, 1}, // never less than one unit
	} {
		if got := derivedFailedUnits(c.claim, c.stored); got != c.want {
			t.Errorf("derivedFailedUnits(%v, %v) = %v, want %v", c.claim, c.stored, got, c.want)
		}
	}
}

func TestCapacityPerInv(t *testing.T) {
	ops := map[string]*opCapacity{
		"PutItem":    {Calls: 10, Reported: 6, ConditionalFailed: 4, Units: 6},
		"UpdateItem": {Calls: 6, Reported: 6, Units: 12},
		"GetItem":    {Calls: 2, Reported: 2, Units: 1},
	}
	u := capacityPerInv(ops, 10, 2)
	want := unitsPerInv{Write: 1.8, Read: 0.1, FailedWrite: 0.8}
	if !near(u.Write, want.Write) || !near(u.Read, want.Read) || !near(u.FailedWrite, want.FailedWrite) || u.Unreported != 0 {
		t.Errorf("capacityPerInv = %+v, want %+v", u, want)
	}
	if !near(u.writeTotal(), 2.6) {
		t.Errorf("writeTotal = %v, want 2.6", u.writeTotal())
	}
	ops["DeleteItem"] = &opCapacity{Calls: 3, Reported: 1, Units: 1}
	if u := capacityPerInv(ops, 10, 2); u.Unreported != 2 {
		t.Errorf("Unreported = %d, want 2 (calls neither reported nor failed)", u.Unreported)
	}
	if u := capacityPerInv(ops, 0, 2); u != (unitsPerInv{}) {
		t.Errorf("capacityPerInv with no invocations = %+v, want zero", u)
	}
}

func TestOpCapacityAdd(t *testing.T) {
	var c opCapacity
	for _, u := range []float64{2, 1, 3} {
		c.add(u)
	}
	if c.Reported != 3 || c.Units != 6 || c.Min != 1 || c.Max != 3 {
		t.Errorf("after adding 2, 1, 3: %+v", c)
	}
}

func TestPricePerMillion(t *testing.T) {
	p := price{WritePerMillion: 0.625, ReadPerMillion: 0.125}
	for _, c := range []struct {
		u    unitsPerInv
		want float64
	}{
		{unitsPerInv{Write: 2}, 1.25},                  // a new key: claim and completion, 1 KB each
		{unitsPerInv{FailedWrite: 1}, 0.625},           // a replay: one failed conditional write
		{unitsPerInv{Write: 1, Read: 1}, 0.75},         // a claim and a consistent read
		{unitsPerInv{Write: 1, FailedWrite: 2}, 1.875}, // reported and derived writes add up
	} {
		if got := p.perMillion(c.u); !near(got, c.want) {
			t.Errorf("perMillion(%+v) = %v, want %v", c.u, got, c.want)
		}
	}
	if onDemand.WritePerMillion != 0.625 || onDemand.ReadPerMillion != 0.125 || onDemand.Region != "us-east-1" {
		t.Errorf("onDemand = %+v: the report states $0.625/$0.125 in us-east-1; change both together", onDemand)
	}
}

// DynamoDB's item size rule, which measureStored uses, is tested with it in
// dynamostore (size_test.go).

func TestCapacityRun(t *testing.T) {
	r := capacityRun{
		New: phaseResult{Phase: "new", N: 4, Capacity: map[string]*opCapacity{
			"PutItem":    {Calls: 4, Reported: 4, Units: 4, Min: 1, Max: 1},
			"UpdateItem": {Calls: 4, Reported: 4, Units: 8, Min: 2, Max: 2},
		}},
		Replay: phaseResult{Phase: "replay", N: 4, Capacity: map[string]*opCapacity{
			"PutItem": {Calls: 4, ConditionalFailed: 4},
		}},
		Stored: storedItems{Count: 5, UnitsMin: 2, UnitsMax: 2},
	}
	if p := r.problem(); p != "" {
		t.Fatalf("problem() = %q", p)
	}
	if got := r.failedUnits(); got != 2 {
		t.Errorf("failedUnits = %v, want 2 (the stored record's, larger than the claim's 1)", got)
	}
	if u := r.perInv("new"); u.writeTotal() != 3 || u.FailedWrite != 0 {
		t.Errorf("perInv(new) = %+v, want 3 write units, none derived", u)
	}
	if u := r.perInv("replay"); u.writeTotal() != 2 || u.FailedWrite != 2 {
		t.Errorf("perInv(replay) = %+v, want 2 derived write units", u)
	}
	r.Stored.Count = 0
	if r.problem() == "" {
		t.Error("problem() is empty without the stored records measured")
	}
	r.Stored.Count = 5
	r.New.Capacity["UpdateItem"].Reported = 3
	if r.problem() == "" {
		t.Error("problem() is empty with a call that reported nothing")
	}
}

func TestPadFor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "payment-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl paymentEvent
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	if got := responseBytes(tmpl, padFor(tmpl, 1024)); got != 1024 {
		t.Errorf("responseBytes(padFor(1024)) = %d, want 1024", got)
	}
	if small, padded := responseBytes(tmpl, 0), responseBytes(tmpl, 10); padded != small+len(`,"receipt":""`)+10 {
		t.Errorf("responseBytes: %d without a receipt, %d with 10 characters", small, padded)
	}
}

func TestFmtRU(t *testing.T) {
	for _, c := range []struct {
		u    unitsPerInv
		want string
	}{
		{unitsPerInv{Write: 2}, "2 WRU"},
		{unitsPerInv{FailedWrite: 1}, "1 WRU (derived)"},
		{unitsPerInv{Write: 1.5, Read: 1}, "1.50 WRU + 1 RRU"},
	} {
		if got := fmtRU(c.u); got != c.want {
			t.Errorf("fmtRU(%+v) = %q, want %q", c.u, got, c.want)
		}
	}
}

func TestCapacityLogRecord(t *testing.T) {
	l := newCapacityLog()
	l.record("PutItem", &types.ConsumedCapacity{CapacityUnits: aws.Float64(1)}, false)
	l.record("PutItem", nil, true)
	l.record("UpdateItem", &types.ConsumedCapacity{}, false) // no units: not reported
	ops := l.take()
	if c := ops["PutItem"]; c.Calls != 2 || c.Reported != 1 || c.ConditionalFailed != 1 || c.Units != 1 {
		t.Errorf("PutItem = %+v", c)
	}
	if c := ops["UpdateItem"]; c.Calls != 1 || c.Reported != 0 {
		t.Errorf("UpdateItem = %+v", c)
	}
	if len(l.take()) != 0 {
		t.Error("take did not start afresh")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
