package reliability_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/e2e"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/nethttp"
	"github.com/idemkit/idemkit/idempotent/storage"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

type item = map[string]types.AttributeValue

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func b(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

// completedItem is a valid COMPLETED record of id, replaying data.
func completedItem(id string, data []byte) item {
	return item{
		"id":         s(id),
		"status":     s("COMPLETED"),
		"expiration": n(time.Now().Add(time.Hour).Unix()),
		"lease":      s("lease-of-someone"),
		"data":       b(data),
		"version":    n(storage.RecordVersion),
	}
}

// completeOnce calls wrapped for a new charge and requires success; it
// returns the charge and the ID of the record the call completed, for a test
// to corrupt.
func completeOnce(t testing.TB, wrapped func(context.Context, charge) (receipt, error), seen *outcomes) (charge, string) {
	t.Helper()
	in := charge{ID: newKey(t)}
	_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	return in, seen.last(t).RecordID
}

// bomb is DEFLATE data that inflates to 65 MB, more than the 64 MB the
// envelope accepts, in 66 KB: one flushed block of 1 MB of zeros, repeated
// (its back-references only reach zeros), then an empty final block.
func bomb(t testing.TB) []byte {
	t.Helper()
	var blk bytes.Buffer
	w, err := flate.NewWriter(&blk, flate.BestCompression)
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 1<<20))
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	return append(append([]byte{'z'}, bytes.Repeat(blk.Bytes(), 65)...), 0x03, 0x00)
}

// TestCorruptRecords writes corrupt and foreign items over a key's record in
// DynamoDB Local, then invokes the key again: every case is refused with
// idempotent.ErrCorruptRecord, never a panic, never a replay, never a run of
// the handler, and the item is left as found.
func TestCorruptRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	store := dynamostore.New(e.client, e.tables.Idempotency)
	good := []byte(`p{"chargeId":"c","run":1}`)
	future := time.Now().Add(time.Minute).UnixMilli()
	deflated := func(raw string) []byte {
		var buf bytes.Buffer
		buf.WriteByte('z')
		w, _ := flate.NewWriter(&buf, flate.BestSpeed)
		_, _ = w.Write([]byte(raw))
		_ = w.Close()
		return buf.Bytes()
	}
	tests := []struct {
		name   string
		change func(it item)
	}{
		{"missing status", func(it item) { delete(it, "status") }},
		{"missing lease", func(it item) { delete(it, "lease") }},
		{"missing expiration", func(it item) { delete(it, "expiration") }},
		{"completed without data", func(it item) { delete(it, "data") }},
		{"empty data", func(it item) { it["data"] = b([]byte{}) }},
		{"status as a number", func(it item) { it["status"] = n(1) }},
		{"status as a list", func(it item) {
			it["status"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{s("COMPLETED")}}
		}},
		{"expiration as a string", func(it item) { it["expiration"] = s(strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)) }},
		{"lease as binary", func(it item) { it["lease"] = b([]byte("lease")) }},
		{"data as a string", func(it item) { it["data"] = s(`{"chargeId":"c","run":1}`) }},
		{"data as a boolean", func(it item) { it["data"] = &types.AttributeValueMemberBOOL{Value: true} }},
		{"version as a string", func(it item) { it["version"] = s("1") }},
		{"version out of range", func(it item) { it["version"] = &types.AttributeValueMemberN{Value: "99999999999999999999"} }},
		{"validation as a number", func(it item) { it["validation"] = n(7) }},
		{"in-progress lease end as a string", func(it item) {
			it["status"] = s("INPROGRESS")
			it["in_progress_expiration"] = s("soon")
			delete(it, "data")
		}},
		{"unknown status", func(it item) { it["status"] = s("EXPIRED") }},
		{"empty status", func(it item) { it["status"] = s("") }},
		{"lower-case status", func(it item) { it["status"] = s("completed") }},
		{"record of version 2", func(it item) { it["version"] = n(2) }},
		{"record of version 0", func(it item) { it["version"] = n(0) }},
		{"record without a version", func(it item) { delete(it, "version") }},
		{"in progress, version 2", func(it item) {
			it["status"] = s("INPROGRESS")
			it["in_progress_expiration"] = n(future)
			it["version"] = n(2)
			delete(it, "data")
		}},
		{"Powertools completed record", func(it item) {
			// Powertools for AWS Lambda's layout: data is the response as a
			// JSON string; no lease, no version.
			delete(it, "lease")
			delete(it, "version")
			it["data"] = s(`{"chargeId":"c","run":1}`)
			it["validation"] = s("d41d8cd98f00b204e9800998ecf8427e")
		}},
		{"Powertools in-progress record", func(it item) {
			delete(it, "lease")
			delete(it, "version")
			delete(it, "data")
			it["status"] = s("INPROGRESS")
			it["in_progress_expiration"] = n(future)
		}},
		{"unknown data encoding", func(it item) { it["data"] = b([]byte(`x{"chargeId":"c"}`)) }},
		{"DEFLATE data that is garbage", func(it item) { it["data"] = b([]byte("z\x00\xff\x13garbage")) }},
		{"DEFLATE data cut short", func(it item) { it["data"] = b(deflated(`{"chargeId":"c","run":1}`)[:8]) }},
		{"DEFLATE bomb", func(it item) { it["data"] = b(bomb(t)) }},
		{"plain data not JSON", func(it item) { it["data"] = b([]byte("p{not json")) }},
		{"plain data of another type", func(it item) { it["data"] = b([]byte(`p"a string, not a receipt"`)) }},
		{"plain data with trailing bytes", func(it item) { it["data"] = b([]byte(`p{"chargeId":"c","run":1}{}`)) }},
	}
	// What each error says, to show which check refused it.
	says := map[string]string{
		"missing status":                    `attribute "status" is missing`,
		"missing lease":                     `attribute "lease" is missing`,
		"missing expiration":                `attribute "expiration" is missing`,
		"completed without data":            "completed record has no data",
		"empty data":                        "completed record has no data",
		"status as a number":                `attribute "status" is N, want S`,
		"status as a list":                  `attribute "status" is L, want S`,
		"expiration as a string":            `attribute "expiration" is S, want N`,
		"lease as binary":                   `attribute "lease" is B, want S`,
		"data as a string":                  `attribute "data" is S, want B`,
		"data as a boolean":                 `attribute "data" is BOOL, want B`,
		"version as a string":               `attribute "version" is S, want N`,
		"version out of range":              `attribute "version" holds "99999999999999999999"`,
		"validation as a number":            `attribute "validation" is N, want S`,
		"in-progress lease end as a string": `attribute "in_progress_expiration" is S, want N`,
		"unknown status":                    `unknown status "EXPIRED"`,
		"empty status":                      `unknown status ""`,
		"lower-case status":                 `unknown status "completed"`,
		"record of version 2":               "record version 2",
		"record of version 0":               "record version 0",
		"record without a version":          "record version 0",
		"in progress, version 2":            "record version 2",
		"Powertools completed record":       `attribute "lease" is missing`,
		"Powertools in-progress record":     `attribute "lease" is missing`,
		"unknown data encoding":             "unknown data encoding 'x'",
		"DEFLATE data that is garbage":      "inflate: flate: corrupt input",
		"DEFLATE data cut short":            "inflate: unexpected EOF",
		"DEFLATE bomb":                      "inflates past 64 MB",
		"plain data not JSON":               "decode response: invalid character 'n'",
		"plain data of another type":        "decode response: json: cannot unmarshal string",
		"plain data with trailing bytes":    "decode response: invalid character '{' after top-level value",
	}
	require.Len(t, says, len(tests), "every case says which check refused it")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wrapped, h, seen := wrapCounter(store)
			in, id := completeOnce(t, wrapped, seen)

			bad := completedItem(id, good)
			tt.change(bad)
			e.put(t, bad)
			stored := e.record(t, id)

			var out receipt
			var err error
			require.NotPanics(t, func() { out, err = wrapped(ctxTimeout(t, 10*time.Second), in) })
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			require.Contains(t, says, tt.name)
			assert.Contains(t, err.Error(), says[tt.name])
			assert.Equal(t, receipt{}, out, "nothing replayed")
			assert.Equal(t, int32(1), h.runs.Load(), "the handler did not run again")
			assert.Equal(t, idempotent.OutcomeRejected, seen.last(t).Outcome)
			assert.Equal(t, stored, e.record(t, id), "the item is left as found")
		})
	}
}

// TestCorruptRecordExpired: once a corrupt item's expiration has passed, it
// is claimed over like any expired record.
func TestCorruptRecordExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	wrapped, _, seen := wrapCounter(dynamostore.New(e.client, e.tables.Idempotency))
	in, id := completeOnce(t, wrapped, seen)
	bad := completedItem(id, []byte("x garbage"))
	bad["expiration"] = n(time.Now().Add(-time.Minute).Unix())
	delete(bad, "lease")
	e.put(t, bad)

	out, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.NoError(t, err)
	assert.Equal(t, int32(2), out.Run)
	assert.Equal(t, string(storage.StatusCompleted), str(e.record(t, id), "status"))
}

// TestInProgressWithoutLeaseEnd: an INPROGRESS item that lacks
// in_progress_expiration (which every INPROGRESS record this library writes
// carries) should be refused as corrupt, as the memory store would let it be
// taken over; DynamoDB's claim condition instead never finds its lease lapsed,
// so the key answers "in progress" until the item expires.
func TestInProgressWithoutLeaseEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	wrapped, _, seen := wrapCounter(dynamostore.New(e.client, e.tables.Idempotency))
	in, id := completeOnce(t, wrapped, seen)
	bad := completedItem(id, nil)
	bad["status"] = s("INPROGRESS")
	delete(bad, "data")
	e.put(t, bad)

	_, err := wrapped(ctxTimeout(t, 10*time.Second), in)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
}

// TestCorruptPaymentRecords: through the payments function, a corrupt
// record is a 500 corrupt-record problem, never a replay.
func TestCorruptPaymentRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var seen outcomes
	var paid atomic.Int32
	invoke := e2e.LocalInvoker(payments.New(dynamostore.New(e.client, e.tables.Idempotency), &payments.LocalProcessor{}, e.client, e.tables.Payments,
		seen.hook()), e2e.PaymentsTimeout)
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("p{not json")},
		{"foreign encoding", []byte("x")},
		{"zero response", []byte(`p{}`)},
		{"null response", []byte(`pnull`)},
		{"status code out of range", []byte(`p{"statusCode":999,"body":"x"}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := samples.HTTP(samples.PaymentNew)
			require.NoError(t, err)
			ev = e2e.NewPersonalize().Payment(ev)
			in, err := json.Marshal(ev)
			require.NoError(t, err)
			out, err := invoke(t.Context(), in)
			require.NoError(t, err)
			var first events.APIGatewayV2HTTPResponse
			require.NoError(t, json.Unmarshal(out, &first))
			require.Equal(t, http.StatusCreated, first.StatusCode)
			paid.Add(1)

			rec := e.record(t, seen.last(t).RecordID)
			rec["data"] = b(tt.data) // the rest (the request's fingerprint) as stored
			e.put(t, rec)
			out, err = invoke(t.Context(), in)
			require.NoError(t, err)
			var resp events.APIGatewayV2HTTPResponse
			require.NoError(t, json.Unmarshal(out, &resp))
			assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, resp.Body)
			assert.Contains(t, resp.Body, nethttp.ProblemCorruptRecord)
			assert.Empty(t, resp.Headers[nethttp.HeaderReplayed])
		})
	}
	assert.Len(t, e.ledger(t), int(paid.Load()), "no payment ran twice")
}
