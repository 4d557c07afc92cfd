package dynamostore_test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

const (
	testTable = "idem-table"
	testID    = "test#5f1c"
	ourLease  = "lease-ours"
)

var (
	t0       = time.Unix(1_700_000_000, 0)
	errBoom  = errors.New("boom")
	composed = func(o *dynamostore.Options) {
		o.KeyAttr = "pk"
		o.SortKeyAttr = "sk"
		o.StaticPartitionKey = "idempotency#orders"
	}
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// oneLine collapses white space, which DynamoDB ignores between clauses.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func ptr[T any](v T) *T { return &v }

// newRecord is the INPROGRESS record of a claim at t0.
func newRecord() storage.Record {
	return storage.Record{
		ID:             testID,
		Status:         storage.StatusInProgress,
		ExpiresAt:      t0.Add(time.Hour),
		LeaseExpiresAt: t0.Add(1500 * time.Millisecond),
		Lease:          ourLease,
		Fingerprint:    "fp",
		Version:        storage.RecordVersion,
	}
}

// storedItem is a valid completed item held by another lease.
func storedItem() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id":         &types.AttributeValueMemberS{Value: testID},
		"status":     &types.AttributeValueMemberS{Value: "COMPLETED"},
		"expiration": &types.AttributeValueMemberN{Value: "1700003600"},
		"lease":      &types.AttributeValueMemberS{Value: "lease-other"},
		"validation": &types.AttributeValueMemberS{Value: "fp"},
		"data":       &types.AttributeValueMemberB{Value: []byte("p{}")},
		"version":    &types.AttributeValueMemberN{Value: "1"},
	}
}

func storedRecord() storage.Record {
	return storage.Record{
		ID:          testID,
		Status:      storage.StatusCompleted,
		ExpiresAt:   time.Unix(1_700_003_600, 0),
		Lease:       "lease-other",
		Fingerprint: "fp",
		Data:        []byte("p{}"),
		Version:     1,
	}
}

func inProgressItem(lease string, leaseEndMs int64) map[string]types.AttributeValue {
	item := storedItem()
	item["status"] = &types.AttributeValueMemberS{Value: "INPROGRESS"}
	item["lease"] = &types.AttributeValueMemberS{Value: lease}
	item["in_progress_expiration"] = &types.AttributeValueMemberN{Value: itoa(leaseEndMs)}
	delete(item, "data")
	return item
}

func TestNewDefaults(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	got := dynamostore.New(&fakeClient{t: t}, testTable).Options()
	assert.Equal(t, dynamostore.Options{
		KeyAttr:                  "id",
		StaticPartitionKey:       "idempotency#idemkit",
		StatusAttr:               "status",
		ExpirationAttr:           "expiration",
		InProgressExpirationAttr: "in_progress_expiration",
		LeaseAttr:                "lease",
		ValidationAttr:           "validation",
		DataAttr:                 "data",
		VersionAttr:              "version",
		StepsAttr:                "steps",
		SuspendedAttr:            "suspended",
		TraceAttr:                "trace",
		MaxItemBytes:             409600,
		ClaimManyConcurrency:     dynamostore.DefaultClaimManyConcurrency,
	}, got)

	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "payments")
	got = dynamostore.New(&fakeClient{t: t}, testTable).Options()
	assert.Equal(t, "idempotency#payments", got.StaticPartitionKey)
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	got := dynamostore.New(&fakeClient{t: t}, testTable,
		func(o *dynamostore.Options) { o.StatusAttr = "st"; o.MaxItemBytes = 1000 },
		func(o *dynamostore.Options) { o.DataAttr = ""; o.MaxItemBytes = -1 }, // cleared: back to the default
		composed,
	).Options()
	assert.Equal(t, "st", got.StatusAttr)
	assert.Equal(t, "data", got.DataAttr)
	assert.Equal(t, storage.DefaultMaxItemBytes, got.MaxItemBytes)
	assert.Equal(t, "pk", got.KeyAttr)
	assert.Equal(t, "sk", got.SortKeyAttr)
	assert.Equal(t, "idempotency#orders", got.StaticPartitionKey)
}

func TestNewPanics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		client dynamostore.Client
		table  string
		opt    func(*dynamostore.Options)
		want   string
	}{
		{"nil client", nil, testTable, nil, "dynamostore: New: nil client"},
		{"empty table", &fakeClient{t: t}, "", nil, "dynamostore: New: empty table name"},
		{"duplicate attribute", &fakeClient{t: t}, testTable, func(o *dynamostore.Options) { o.LeaseAttr = "status" },
			`dynamostore: New: attribute name "status" is used twice`},
		{"suspended named as the steps", &fakeClient{t: t}, testTable, func(o *dynamostore.Options) { o.SuspendedAttr = "steps" },
			`dynamostore: New: attribute name "steps" is used twice`},
		{"sort key named as the partition key", &fakeClient{t: t}, testTable, func(o *dynamostore.Options) { o.SortKeyAttr = "id" },
			`dynamostore: New: attribute name "id" is used twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []func(*dynamostore.Options)
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			assert.PanicsWithValue(t, tt.want, func() { dynamostore.New(tt.client, tt.table, opts...) })
		})
	}
}

func TestClaimRequest(t *testing.T) {
	t.Parallel()
	// The claim condition: no item, our own lease, an expired record, or a
	// lapsed one of this format that holds no steps and whose fingerprint
	// this claim may take over.
	const (
		unboundCond = "attribute_not_exists(id) OR lease = S(" + ourLease + ") OR expiration < N(1700000000) OR " +
			"(status = S(INPROGRESS) AND in_progress_expiration < N(1700000000000) AND version = N(1) AND " +
			"attribute_exists(lease) AND attribute_not_exists(steps))"
		boundCond = "attribute_not_exists(id) OR lease = S(" + ourLease + ") OR expiration < N(1700000000) OR " +
			"(status = S(INPROGRESS) AND in_progress_expiration < N(1700000000000) AND version = N(1) AND " +
			"attribute_exists(lease) AND attribute_not_exists(steps) AND (attribute_not_exists(validation) OR validation = S(fp)))"
	)
	tests := []struct {
		name     string
		opts     []func(*dynamostore.Options)
		rec      func(*storage.Record)
		wantItem map[string]string
		wantCond string
	}{
		{
			name: "default layout",
			wantItem: map[string]string{
				"id": "S(" + testID + ")", "status": "S(INPROGRESS)", "expiration": "N(1700003600)",
				"in_progress_expiration": "N(1700000001500)", "lease": "S(" + ourLease + ")",
				"validation": "S(fp)", "version": "N(1)",
			},
			wantCond: boundCond,
		},
		{
			name: "no fingerprint, with data",
			rec:  func(r *storage.Record) { r.Fingerprint = ""; r.Data = []byte("x") },
			wantItem: map[string]string{
				"id": "S(" + testID + ")", "status": "S(INPROGRESS)", "expiration": "N(1700003600)",
				"in_progress_expiration": "N(1700000001500)", "lease": "S(" + ourLease + ")",
				"data": "B(x)", "version": "N(1)",
			},
			wantCond: unboundCond,
		},
		{
			name: "no lease end",
			rec:  func(r *storage.Record) { r.LeaseExpiresAt = time.Time{} },
			wantItem: map[string]string{
				"id": "S(" + testID + ")", "status": "S(INPROGRESS)", "expiration": "N(1700003600)",
				"lease": "S(" + ourLease + ")", "validation": "S(fp)", "version": "N(1)",
			},
			wantCond: boundCond,
		},
		{
			name: "composite key",
			opts: []func(*dynamostore.Options){composed},
			wantItem: map[string]string{
				"pk": "S(idempotency#orders)", "sk": "S(" + testID + ")", "status": "S(INPROGRESS)",
				"expiration": "N(1700003600)", "in_progress_expiration": "N(1700000001500)",
				"lease": "S(" + ourLease + ")", "validation": "S(fp)", "version": "N(1)",
			},
			// attribute_not_exists of the partition key: the item with the
			// whole key (pk, sk) does not exist.
			wantCond: strings.Replace(boundCond, "attribute_not_exists(id)", "attribute_not_exists(pk)", 1),
		},
		{
			name: "custom names, dots are not paths",
			opts: []func(*dynamostore.Options){func(o *dynamostore.Options) {
				o.KeyAttr, o.StatusAttr, o.ExpirationAttr, o.InProgressExpirationAttr = "k.ey", "s", "ttl", "lease.end"
				o.LeaseAttr, o.ValidationAttr, o.DataAttr, o.VersionAttr, o.StepsAttr = "l", "v", "d", "fmt", "st.eps"
				o.SuspendedAttr = "paused.at"
			}},
			wantItem: map[string]string{
				"k.ey": "S(" + testID + ")", "s": "S(INPROGRESS)", "ttl": "N(1700003600)",
				"lease.end": "N(1700000001500)", "l": "S(" + ourLease + ")", "v": "S(fp)", "fmt": "N(1)",
			},
			wantCond: "attribute_not_exists(k.ey) OR l = S(" + ourLease + ") OR ttl < N(1700000000) OR " +
				"(s = S(INPROGRESS) AND lease.end < N(1700000000000) AND fmt = N(1) AND " +
				"attribute_exists(l) AND attribute_not_exists(st.eps) AND (attribute_not_exists(v) OR v = S(fp)))",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got *dynamodb.PutItemInput
			fc := &fakeClient{t: t, putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				got = in
				return &dynamodb.PutItemOutput{}, nil
			}}
			rec := newRecord()
			if tt.rec != nil {
				tt.rec(&rec)
			}
			res, err := dynamostore.New(fc, testTable, tt.opts...).Claim(t.Context(), rec, t0)
			require.NoError(t, err)
			assert.Equal(t, storage.ClaimResult{Claimed: true}, res)
			require.NotNil(t, got)
			assert.Equal(t, testTable, *got.TableName)
			assert.Equal(t, types.ReturnValueAllOld, got.ReturnValues)
			assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, got.ReturnValuesOnConditionCheckFailure)
			assert.Equal(t, tt.wantItem, showItem(got.Item), "the whole new record: no steps, not suspended")
			assert.Equal(t, tt.wantCond, resolve(t, got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues))
			assertAllUsed(t, *got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues)
			assert.Equal(t, []string{"PutItem"}, fc.Calls())
		})
	}
}

// assertAllUsed checks that every name and value placeholder given is used
// in the expressions (DynamoDB refuses an unused one).
func assertAllUsed(t *testing.T, exprs string, names map[string]string, values map[string]types.AttributeValue) {
	t.Helper()
	used := make(map[string]bool)
	for _, p := range placeholder.FindAllString(exprs, -1) {
		used[p] = true
	}
	for p := range values {
		assert.True(t, used[p], "unused value %s", p)
	}
	for p := range names {
		assert.True(t, used[p], "unused name %s", p)
	}
}

func showItem(item map[string]types.AttributeValue) map[string]string {
	out := make(map[string]string, len(item))
	for k, v := range item {
		out[k] = show(v)
	}
	return out
}

func TestClaimOutcomes(t *testing.T) {
	t.Parallel()
	put := func(out *dynamodb.PutItemOutput, err error) func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		return func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return out, err }
	}
	// puts answers successive claims (PutItem calls) in turn.
	puts := func(answers ...error) func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		i := 0
		return func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			err := answers[i]
			i++
			return &dynamodb.PutItemOutput{}, err
		}
	}
	get := func(item map[string]types.AttributeValue, err error) func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		return func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			if in.ConsistentRead == nil || !*in.ConsistentRead {
				return nil, errors.New("fallback read is not consistent")
			}
			if got := showItem(in.Key); len(got) != 1 || got["id"] != "S("+testID+")" {
				return nil, errors.New("fallback read of the wrong key")
			}
			return &dynamodb.GetItemOutput{Item: item}, err
		}
	}
	stored := storedRecord()
	unknown := storedRecord()
	unknown.Status = "PENDING"
	noVersion := storedRecord()
	noVersion.Version = 0

	tests := []struct {
		name      string
		put       func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
		get       func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
		want      storage.ClaimResult
		wantErr   []error // errors.Is targets
		wantMsg   string
		wantCalls []string
	}{
		{
			name: "new key", put: put(&dynamodb.PutItemOutput{}, nil),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "takeover of a lapsed lease",
			put:  put(&dynamodb.PutItemOutput{Attributes: inProgressItem("lease-other", 1)}, nil),
			want: storage.ClaimResult{Claimed: true, TookOver: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "resume of a suspended record",
			put: put(&dynamodb.PutItemOutput{Attributes: func() map[string]types.AttributeValue {
				item := inProgressItem("lease-other", 1)
				item["suspended"] = &types.AttributeValueMemberBOOL{Value: true}
				return item
			}()}, nil),
			want: storage.ClaimResult{Claimed: true, Resumed: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "a stored false is not suspended: a takeover",
			put: put(&dynamodb.PutItemOutput{Attributes: func() map[string]types.AttributeValue {
				item := inProgressItem("lease-other", 1)
				item["suspended"] = &types.AttributeValueMemberBOOL{Value: false}
				return item
			}()}, nil),
			want: storage.ClaimResult{Claimed: true, TookOver: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "refused by a suspended record (another payload)",
			put: put(nil, ccf(func() map[string]types.AttributeValue {
				item := inProgressItem("lease-other", t0.UnixMilli()-1)
				item["validation"] = &types.AttributeValueMemberS{Value: "fp-other"}
				item["suspended"] = &types.AttributeValueMemberBOOL{Value: true}
				return item
			}())),
			want: storage.ClaimResult{Existing: &storage.Record{
				ID: testID, Status: storage.StatusInProgress, ExpiresAt: time.Unix(1_700_003_600, 0),
				LeaseExpiresAt: time.UnixMilli(t0.UnixMilli() - 1), Lease: "lease-other", Fingerprint: "fp-other",
				Version: 1, Suspended: true,
			}}, wantCalls: []string{"PutItem"},
		},
		{
			name: "expired completed record is not a takeover",
			put:  put(&dynamodb.PutItemOutput{Attributes: storedItem()}, nil),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "replaced corrupt record is not an error",
			put: put(&dynamodb.PutItemOutput{Attributes: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: testID}, "status": &types.AttributeValueMemberN{Value: "1"},
			}}, nil),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "duplicate of a completed record",
			put:  put(nil, ccf(storedItem())),
			want: storage.ClaimResult{Existing: &stored}, wantCalls: []string{"PutItem"},
		},
		{
			name: "lost response: the refusing item carries our lease",
			put:  put(nil, ccf(inProgressItem(ourLease, t0.Add(time.Minute).UnixMilli()))),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem"},
		},
		{
			name: "unknown status passes through",
			put: put(nil, ccf(func() map[string]types.AttributeValue {
				item := storedItem()
				item["status"] = &types.AttributeValueMemberS{Value: "PENDING"}
				return item
			}())),
			want: storage.ClaimResult{Existing: &unknown}, wantCalls: []string{"PutItem"},
		},
		{
			name: "no version decodes as version 0",
			put: put(nil, ccf(func() map[string]types.AttributeValue {
				item := storedItem()
				delete(item, "version")
				return item
			}())),
			want: storage.ClaimResult{Existing: &noVersion}, wantCalls: []string{"PutItem"},
		},
		{
			name: "no item returned: one consistent read",
			put:  put(nil, ccf(nil)), get: get(storedItem(), nil),
			want: storage.ClaimResult{Existing: &stored}, wantCalls: []string{"PutItem", "GetItem"},
		},
		{
			name: "no item returned, the read finds our lease",
			put:  put(nil, ccf(nil)), get: get(inProgressItem(ourLease, t0.Add(time.Minute).UnixMilli()), nil),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem", "GetItem"},
		},
		{
			name: "no item returned, deleted before the read: claim again",
			put:  puts(ccf(nil), nil), get: get(nil, nil),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem", "GetItem", "PutItem"},
		},
		{
			name: "no item returned, the read finds a claimable record: claim again",
			put:  puts(ccf(nil), nil), get: get(inProgressItem("lease-other", t0.UnixMilli()-1), nil),
			want: storage.ClaimResult{Claimed: true}, wantCalls: []string{"PutItem", "GetItem", "PutItem"},
		},
		{
			name: "refused twice without a record",
			put:  puts(ccf(nil), ccf(nil)), get: get(nil, nil),
			wantMsg:   "dynamostore: claim: refused twice, but no live record was found",
			wantCalls: []string{"PutItem", "GetItem", "PutItem", "GetItem"},
		},
		{
			name: "fallback read fails",
			put:  put(nil, ccf(nil)), get: get(nil, errBoom),
			wantErr: []error{errBoom}, wantMsg: "dynamostore: claim: read the refusing record: boom",
			wantCalls: []string{"PutItem", "GetItem"},
		},
		{
			name: "store error",
			put:  put(nil, errBoom), wantErr: []error{errBoom}, wantMsg: "dynamostore: claim: boom",
			wantCalls: []string{"PutItem"},
		},
		{
			name: "corrupt refusing record",
			put: put(nil, ccf(func() map[string]types.AttributeValue {
				item := storedItem()
				item["status"] = &types.AttributeValueMemberN{Value: "1"}
				return item
			}())),
			wantErr:   []error{idempotent.ErrCorruptRecord},
			wantMsg:   `dynamostore: claim: idempotent: corrupt or foreign record: attribute "status" is N, want S`,
			wantCalls: []string{"PutItem"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, putItem: tt.put, getItem: tt.get}
			got, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			if tt.wantMsg != "" {
				require.EqualError(t, err, tt.wantMsg)
				for _, target := range tt.wantErr {
					assert.ErrorIs(t, err, target)
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
			assert.Equal(t, tt.wantCalls, fc.Calls())
		})
	}
}

func TestClaimStoreErrorKeepsSDKError(t *testing.T) {
	t.Parallel()
	throttled := &types.ProvisionedThroughputExceededException{Message: ptr("slow down")}
	fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		return nil, throttled
	}}
	_, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
	var target *types.ProvisionedThroughputExceededException
	require.ErrorAs(t, err, &target)
	assert.True(t, strings.HasPrefix(err.Error(), "dynamostore: claim: "), err.Error())
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	var nilS *types.AttributeValueMemberS
	tests := []struct {
		name   string
		opts   []func(*dynamostore.Options)
		change func(map[string]types.AttributeValue)
		want   string // after "attribute "
	}{
		{"missing id", nil, func(m map[string]types.AttributeValue) { delete(m, "id") }, `"id" is missing`},
		{"missing status", nil, func(m map[string]types.AttributeValue) { delete(m, "status") }, `"status" is missing`},
		{"missing expiration", nil, func(m map[string]types.AttributeValue) { delete(m, "expiration") }, `"expiration" is missing`},
		{"missing lease", nil, func(m map[string]types.AttributeValue) { delete(m, "lease") }, `"lease" is missing`},
		{"id as N", nil, func(m map[string]types.AttributeValue) { m["id"] = &types.AttributeValueMemberN{Value: "1"} }, `"id" is N, want S`},
		{"status as N", nil, func(m map[string]types.AttributeValue) { m["status"] = &types.AttributeValueMemberN{Value: "1"} }, `"status" is N, want S`},
		{"status as NULL", nil, func(m map[string]types.AttributeValue) { m["status"] = &types.AttributeValueMemberNULL{Value: true} }, `"status" is NULL, want S`},
		{"status nil", nil, func(m map[string]types.AttributeValue) { m["status"] = nil }, `"status" is empty, want S`},
		{"status typed nil", nil, func(m map[string]types.AttributeValue) { m["status"] = nilS }, `"status" is a nil S, want S`},
		{"expiration as S", nil, func(m map[string]types.AttributeValue) { m["expiration"] = &types.AttributeValueMemberS{Value: "1"} }, `"expiration" is S, want N`},
		{"expiration not a number", nil, func(m map[string]types.AttributeValue) { m["expiration"] = &types.AttributeValueMemberN{Value: "soon"} },
			`"expiration" holds "soon", want an integer of 64 bits`},
		{"expiration fractional", nil, func(m map[string]types.AttributeValue) { m["expiration"] = &types.AttributeValueMemberN{Value: "1.5"} },
			`"expiration" holds "1.5", want an integer of 64 bits`},
		{"expiration out of range", nil, func(m map[string]types.AttributeValue) {
			m["expiration"] = &types.AttributeValueMemberN{Value: "99999999999999999999"}
		}, `"expiration" holds "99999999999999999999", want an integer of 64 bits`},
		{"lease expiration as S", nil, func(m map[string]types.AttributeValue) {
			m["in_progress_expiration"] = &types.AttributeValueMemberS{Value: "1"}
		}, `"in_progress_expiration" is S, want N`},
		{"lease expiration not a number", nil, func(m map[string]types.AttributeValue) {
			m["in_progress_expiration"] = &types.AttributeValueMemberN{Value: "x"}
		}, `"in_progress_expiration" holds "x", want an integer of 64 bits`},
		{"lease as B", nil, func(m map[string]types.AttributeValue) { m["lease"] = &types.AttributeValueMemberB{Value: []byte("l")} }, `"lease" is B, want S`},
		{"validation as N", nil, func(m map[string]types.AttributeValue) { m["validation"] = &types.AttributeValueMemberN{Value: "1"} }, `"validation" is N, want S`},
		{"data as S", nil, func(m map[string]types.AttributeValue) { m["data"] = &types.AttributeValueMemberS{Value: "p{}"} }, `"data" is S, want B`},
		{"data as BOOL", nil, func(m map[string]types.AttributeValue) { m["data"] = &types.AttributeValueMemberBOOL{Value: true} }, `"data" is BOOL, want B`},
		{"version as S", nil, func(m map[string]types.AttributeValue) { m["version"] = &types.AttributeValueMemberS{Value: "1"} }, `"version" is S, want N`},
		{"version fractional", nil, func(m map[string]types.AttributeValue) { m["version"] = &types.AttributeValueMemberN{Value: "1.0"} },
			`"version" holds "1.0", want an integer of 64 bits`},
		{"version as a list", nil, func(m map[string]types.AttributeValue) { m["version"] = &types.AttributeValueMemberL{} }, `"version" is L, want N`},
		{"suspended as S", nil, func(m map[string]types.AttributeValue) { m["suspended"] = &types.AttributeValueMemberS{Value: "true"} },
			`"suspended" is S, want BOOL`},
		{"suspended as N", nil, func(m map[string]types.AttributeValue) { m["suspended"] = &types.AttributeValueMemberN{Value: "1"} },
			`"suspended" is N, want BOOL`},
		{"composite: missing sort key", []func(*dynamostore.Options){composed}, func(m map[string]types.AttributeValue) {
			m["pk"] = &types.AttributeValueMemberS{Value: "idempotency#orders"}
			delete(m, "id")
		}, `"sk" is missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			item := storedItem()
			tt.change(item)
			fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				return nil, ccf(item)
			}}
			var res storage.ClaimResult
			var err error
			require.NotPanics(t, func() {
				res, err = dynamostore.New(fc, testTable, tt.opts...).Claim(t.Context(), newRecord(), t0)
			})
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			assert.Equal(t, "dynamostore: claim: idempotent: corrupt or foreign record: attribute "+tt.want, err.Error())
			assert.Equal(t, storage.ClaimResult{}, res)
		})
	}
}

func TestDecodeComposite(t *testing.T) {
	t.Parallel()
	item := inProgressItem("lease-other", t0.Add(time.Minute).UnixMilli())
	item["pk"] = &types.AttributeValueMemberS{Value: "idempotency#orders"}
	item["sk"] = item["id"]
	delete(item, "id")
	fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(item) }}
	res, err := dynamostore.New(fc, testTable, composed).Claim(t.Context(), newRecord(), t0)
	require.NoError(t, err)
	require.NotNil(t, res.Existing)
	assert.Equal(t, storage.Record{
		ID:             testID,
		Status:         storage.StatusInProgress,
		ExpiresAt:      time.Unix(1_700_003_600, 0),
		LeaseExpiresAt: time.UnixMilli(t0.Add(time.Minute).UnixMilli()),
		Lease:          "lease-other",
		Fingerprint:    "fp",
		Version:        1,
	}, *res.Existing)
}

// completedRecord is newRecord completed with data.
func completedRecord(data []byte) storage.Record {
	r := newRecord()
	r.Status = storage.StatusCompleted
	r.LeaseExpiresAt = time.Time{}
	r.ExpiresAt = t0.Add(2 * time.Hour)
	r.Data = data
	return r
}

func TestCompleteRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []func(*dynamostore.Options)
		data       []byte
		trace      string
		wantKey    map[string]string
		wantUpdate string
	}{
		{
			name: "default layout", data: []byte("p{}"),
			wantKey:    map[string]string{"id": "S(" + testID + ")"},
			wantUpdate: "SET status = S(COMPLETED), data = B(p{}), expiration = N(1700007200) REMOVE in_progress_expiration, steps, suspended, trace",
		},
		{
			name: "composite key", data: []byte("p{}"), opts: []func(*dynamostore.Options){composed},
			wantKey:    map[string]string{"pk": "S(idempotency#orders)", "sk": "S(" + testID + ")"},
			wantUpdate: "SET status = S(COMPLETED), data = B(p{}), expiration = N(1700007200) REMOVE in_progress_expiration, steps, suspended, trace",
		},
		{
			name:       "no data",
			wantKey:    map[string]string{"id": "S(" + testID + ")"},
			wantUpdate: "SET status = S(COMPLETED), expiration = N(1700007200) REMOVE data, in_progress_expiration, steps, suspended, trace",
		},
		{
			name: "traced", data: []byte("p{}"), trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			wantKey:    map[string]string{"id": "S(" + testID + ")"},
			wantUpdate: "SET status = S(COMPLETED), data = B(p{}), expiration = N(1700007200), trace = S(00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01) REMOVE in_progress_expiration, steps, suspended",
		},
		{
			name: "traced, no data", trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			wantKey:    map[string]string{"id": "S(" + testID + ")"},
			wantUpdate: "SET status = S(COMPLETED), expiration = N(1700007200), trace = S(00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01) REMOVE data, in_progress_expiration, steps, suspended",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got *dynamodb.UpdateItemInput
			fc := &fakeClient{t: t, updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				got = in
				return &dynamodb.UpdateItemOutput{}, nil
			}}
			rec := completedRecord(tt.data)
			rec.Trace = tt.trace
			require.NoError(t, dynamostore.New(fc, testTable, tt.opts...).Complete(t.Context(), rec))
			require.NotNil(t, got)
			assert.Equal(t, testTable, *got.TableName)
			assert.Equal(t, tt.wantKey, showItem(got.Key))
			assert.Equal(t, tt.wantUpdate, oneLine(resolve(t, got.UpdateExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues)))
			assert.Equal(t, "lease = S("+ourLease+")", resolve(t, got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues),
				"fenced by the lease alone, so a retried completion succeeds")
			assert.Empty(t, got.ReturnValues)
			assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, got.ReturnValuesOnConditionCheckFailure,
				"a failure says what holds the record")
			assertAllUsed(t, *got.UpdateExpression+" "+*got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues)
		})
	}
}

func TestCompleteErrors(t *testing.T) {
	t.Parallel()
	tooLarge := &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size to update has exceeded the maximum allowed size"}
	otherValidation := &smithy.GenericAPIError{Code: "ValidationException", Message: "One or more parameter values were invalid"}
	tests := []struct {
		name    string
		err     error
		wantErr []error
		wantMsg string
	}{
		{"refused by DynamoDB as too large", tooLarge, []error{storage.ErrTooLarge, tooLarge},
			"dynamostore: complete: idempotent: record too large for the store: api error ValidationException: Item size to update has exceeded the maximum allowed size"},
		{"other validation error", otherValidation, []error{otherValidation},
			"dynamostore: complete: api error ValidationException: One or more parameter values were invalid"},
		{"store error", errBoom, []error{errBoom}, "dynamostore: complete: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, tt.err }}
			err := dynamostore.New(fc, testTable).Complete(t.Context(), completedRecord([]byte("p{}")))
			require.EqualError(t, err, tt.wantMsg)
			for _, target := range tt.wantErr {
				assert.ErrorIs(t, err, target)
			}
			if !slices.Contains(tt.wantErr, storage.ErrTooLarge) {
				assert.NotErrorIs(t, err, storage.ErrTooLarge)
			}
		})
	}
}

func TestCompleteItemSizeLimit(t *testing.T) {
	t.Parallel()
	rec := completedRecord([]byte("p0123456789"))
	// DynamoDB's rules: names + values; numbers take significant digits / 2 + 1.
	size := func(o dynamostore.Options) int {
		n := len(o.StatusAttr) + len("COMPLETED") +
			len(o.ExpirationAttr) + 5 + // 1700007200: 8 significant digits → 4 + 1
			len(o.LeaseAttr) + len(ourLease) +
			len(o.ValidationAttr) + len("fp") +
			len(o.DataAttr) + len(rec.Data) +
			len(o.VersionAttr) + 2 // 1 → 1 + 1
		if o.SortKeyAttr != "" {
			return n + len(o.KeyAttr) + len(o.StaticPartitionKey) + len(o.SortKeyAttr) + len(testID)
		}
		return n + len(o.KeyAttr) + len(testID)
	}
	for _, layout := range []struct {
		name string
		opts []func(*dynamostore.Options)
	}{{"default layout", nil}, {"composite key", []func(*dynamostore.Options){composed}}} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			exact := size(dynamostore.New(&fakeClient{t: t}, testTable, layout.opts...).Options())
			for _, limit := range []int{exact, exact - 1} {
				fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					return &dynamodb.UpdateItemOutput{}, nil
				}}
				opts := slices.Concat(layout.opts, []func(*dynamostore.Options){func(o *dynamostore.Options) { o.MaxItemBytes = limit }})
				err := dynamostore.New(fc, testTable, opts...).Complete(t.Context(), rec)
				if limit == exact {
					require.NoError(t, err, "an item of exactly MaxItemBytes fits")
					assert.Equal(t, []string{"UpdateItem"}, fc.Calls())
					continue
				}
				require.ErrorIs(t, err, storage.ErrTooLarge)
				assert.Equal(t, "dynamostore: complete: idempotent: record too large for the store: the item would be "+
					itoa(int64(exact))+" bytes (limit "+itoa(int64(limit))+")", err.Error())
				assert.Empty(t, fc.Calls(), "refused without calling DynamoDB")
			}
		})
	}
}

func TestCompleteDefaultLimitIs400KB(t *testing.T) {
	t.Parallel()
	fc := &fakeClient{t: t}
	err := dynamostore.New(fc, testTable).Complete(t.Context(), completedRecord(bytes.Repeat([]byte{'x'}, 400<<10)))
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Empty(t, fc.Calls())
}

func TestReleaseRequest(t *testing.T) {
	t.Parallel()
	for _, layout := range []struct {
		name    string
		opts    []func(*dynamostore.Options)
		wantKey map[string]string
		cond    string
	}{
		{"default layout", nil, map[string]string{"id": "S(" + testID + ")"}, "attribute_not_exists(id) OR (lease = S(" + ourLease + ") AND status = S(INPROGRESS))"},
		{"composite key", []func(*dynamostore.Options){composed}, map[string]string{"pk": "S(idempotency#orders)", "sk": "S(" + testID + ")"},
			"attribute_not_exists(pk) OR (lease = S(" + ourLease + ") AND status = S(INPROGRESS))"},
	} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			var got *dynamodb.DeleteItemInput
			fc := &fakeClient{t: t, deleteItem: func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
				got = in
				return &dynamodb.DeleteItemOutput{}, nil
			}}
			require.NoError(t, dynamostore.New(fc, testTable, layout.opts...).Release(t.Context(), testID, ourLease))
			require.NotNil(t, got)
			assert.Equal(t, testTable, *got.TableName)
			assert.Equal(t, layout.wantKey, showItem(got.Key))
			assert.Equal(t, layout.cond, resolve(t, got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues))
			assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, got.ReturnValuesOnConditionCheckFailure)
			assert.Len(t, got.ExpressionAttributeNames, 3)
			assert.Len(t, got.ExpressionAttributeValues, 2)
		})
	}
}

func TestReleaseOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     error
		wantErr []error
		wantMsg string
	}{
		// DynamoDB deletes nothing and reports success for a missing item:
		// the condition admits it.
		{name: "released, or already gone"},
		// A failed condition: see TestFencedWritesDecideOnTheItem.
		{"store error", errBoom, []error{errBoom}, "dynamostore: release: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, deleteItem: func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
				return &dynamodb.DeleteItemOutput{}, tt.err
			}}
			err := dynamostore.New(fc, testTable).Release(t.Context(), testID, ourLease)
			if tt.wantMsg == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantMsg)
			for _, target := range tt.wantErr {
				assert.ErrorIs(t, err, target)
			}
			assert.Equal(t, []string{"DeleteItem"}, fc.Calls())
		})
	}
}
