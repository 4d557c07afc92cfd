package dynamostore_test

import (
	"bytes"
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

// stepsAttr is a stored steps list.
func stepsAttr(steps ...storage.Step) *types.AttributeValueMemberL {
	l := &types.AttributeValueMemberL{}
	for _, st := range steps {
		m := map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: st.Name}}
		if len(st.Data) > 0 {
			m["data"] = &types.AttributeValueMemberB{Value: st.Data}
		}
		l.Value = append(l.Value, &types.AttributeValueMemberM{Value: m})
	}
	return l
}

var twoSteps = []storage.Step{{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}, {Name: "ledger"}}

// withSteps is item with the steps attribute set.
func withSteps(item map[string]types.AttributeValue, steps ...storage.Step) map[string]types.AttributeValue {
	item["steps"] = stepsAttr(steps...)
	return item
}

func TestClaimKeepsSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		old  map[string]types.AttributeValue
		want storage.ClaimResult
	}{
		{
			name: "takeover for the same payload",
			old:  withSteps(inProgressItem("lease-other", 1), twoSteps...),
			want: storage.ClaimResult{Claimed: true, TookOver: true, Steps: twoSteps},
		},
		{
			// A retried claim finds its own record, which kept the steps
			// the first time.
			name: "retried claim",
			old:  withSteps(inProgressItem(ourLease, t0.Add(time.Minute).UnixMilli()), twoSteps...),
			want: storage.ClaimResult{Claimed: true, Steps: twoSteps},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return &dynamodb.UpdateItemOutput{Attributes: tt.old}, nil
			}}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res)
			assert.Equal(t, []string{"UpdateItem"}, fc.Calls(), "resuming costs the claim alone")
		})
	}
}

func TestClaimKeptStepsCorrupt(t *testing.T) {
	t.Parallel()
	old := inProgressItem("lease-other", 1)
	old["steps"] = &types.AttributeValueMemberS{Value: "charge"}
	fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{Attributes: old}, nil
	}}
	res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.EqualError(t, err, `dynamostore: claim: the claimed record's steps: idempotent: corrupt or foreign record: attribute "steps" is S, want L`)
	assert.Equal(t, storage.ClaimResult{}, res)
}

func TestClaimRefusedWithSteps(t *testing.T) {
	t.Parallel()
	live := withSteps(inProgressItem("lease-other", t0.Add(time.Minute).UnixMilli()), twoSteps...)
	fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, ccf(live) }}
	res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
	require.NoError(t, err)
	require.NotNil(t, res.Existing)
	assert.Equal(t, twoSteps, res.Existing.Steps)
	assert.False(t, res.Claimed)
}

// TestClaimReplacesStepsItMayNotKeep: the claim condition refuses a
// replaceable record whose steps the claim may not keep; Claim replaces it
// with a PutItem conditioned on the record as read, without the steps.
func TestClaimReplacesStepsItMayNotKeep(t *testing.T) {
	t.Parallel()
	expired := withSteps(inProgressItem("lease-other", t0.Add(-2*time.Hour).UnixMilli()), twoSteps...)
	expired["expiration"] = &types.AttributeValueMemberN{Value: itoa(t0.Add(-time.Hour).Unix())}
	otherPayload := withSteps(inProgressItem("lease-other", t0.UnixMilli()-1), twoSteps...)
	delete(otherPayload, "validation") // the lapsed owner had no fingerprint: the liveness rule lets any claim take over
	expiredCompleted := storedItem()
	expiredCompleted["expiration"] = &types.AttributeValueMemberN{Value: itoa(t0.Unix() - 1)}
	expiredCompleted = withSteps(expiredCompleted, twoSteps...)
	suspendedOtherPayload := withSteps(inProgressItem("lease-other", t0.UnixMilli()-1), twoSteps...)
	delete(suspendedOtherPayload, "validation")
	suspendedOtherPayload["suspended"] = &types.AttributeValueMemberBOOL{Value: true}

	tests := []struct {
		name     string
		old      map[string]types.AttributeValue
		wantCond string
		want     storage.ClaimResult
	}{
		{
			name:     "expired in progress",
			old:      expired,
			wantCond: "((lease = S(lease-other)) AND (status = S(INPROGRESS)) AND (expiration = N(1699996400))) AND (in_progress_expiration = N(1699992800000))",
			want:     storage.ClaimResult{Claimed: true, TookOver: true},
		},
		{
			name:     "lapsed, without a fingerprint",
			old:      otherPayload,
			wantCond: "((lease = S(lease-other)) AND (status = S(INPROGRESS)) AND (expiration = N(1700003600))) AND (in_progress_expiration = N(1699999999999))",
			want:     storage.ClaimResult{Claimed: true, TookOver: true},
		},
		{
			// Suspended by its owner: the claim resumes the record (without
			// its steps, for another payload), it does not take it over.
			name:     "suspended, without a fingerprint",
			old:      suspendedOtherPayload,
			wantCond: "((lease = S(lease-other)) AND (status = S(INPROGRESS)) AND (expiration = N(1700003600))) AND (in_progress_expiration = N(1699999999999))",
			want:     storage.ClaimResult{Claimed: true, Resumed: true},
		},
		{
			name:     "expired completed",
			old:      expiredCompleted,
			wantCond: "((lease = S(lease-other)) AND (status = S(COMPLETED)) AND (expiration = N(1699999999))) AND (attribute_not_exists (in_progress_expiration))",
			want:     storage.ClaimResult{Claimed: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var put *dynamodb.PutItemInput
			fc := &fakeClient{t: t,
				updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, ccf(tt.old) },
				putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
					put = in
					return &dynamodb.PutItemOutput{Attributes: tt.old}, nil
				},
			}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res)
			assert.Equal(t, []string{"UpdateItem", "PutItem"}, fc.Calls(), "one call more, in this rare case only")
			require.NotNil(t, put)
			assert.Equal(t, map[string]string{
				"id": "S(" + testID + ")", "status": "S(INPROGRESS)", "expiration": "N(1700003600)",
				"in_progress_expiration": "N(1700000001500)", "lease": "S(" + ourLease + ")",
				"validation": "S(fp)", "version": "N(1)",
			}, showItem(put.Item), "the new record, without steps")
			assert.Equal(t, tt.wantCond, resolve(t, put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues))
			assert.Equal(t, types.ReturnValueAllOld, put.ReturnValues)
			assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, put.ReturnValuesOnConditionCheckFailure)
		})
	}
}

func TestClaimReplacementRaces(t *testing.T) {
	t.Parallel()
	expired := withSteps(inProgressItem("lease-other", t0.Add(-2*time.Hour).UnixMilli()), twoSteps...)
	expired["expiration"] = &types.AttributeValueMemberN{Value: itoa(t0.Add(-time.Hour).Unix())}
	live := inProgressItem("lease-third", t0.Add(time.Minute).UnixMilli())
	liveRec := storage.Record{ID: testID, Status: storage.StatusInProgress, ExpiresAt: time.Unix(1_700_003_600, 0),
		LeaseExpiresAt: time.UnixMilli(t0.Add(time.Minute).UnixMilli()), Lease: "lease-third", Fingerprint: "fp", Version: 1}

	tests := []struct {
		name      string
		updates   []func() (*dynamodb.UpdateItemOutput, error)
		puts      []func() (*dynamodb.PutItemOutput, error)
		get       map[string]types.AttributeValue // the fallback read's item
		want      storage.ClaimResult
		wantMsg   string
		wantCalls []string
	}{
		{
			name:      "another claim won meanwhile: refused with its record",
			updates:   []func() (*dynamodb.UpdateItemOutput, error){refuse(expired), refuse(live)},
			puts:      []func() (*dynamodb.PutItemOutput, error){func() (*dynamodb.PutItemOutput, error) { return nil, ccf(live) }},
			want:      storage.ClaimResult{Existing: &liveRec},
			wantCalls: []string{"UpdateItem", "PutItem", "UpdateItem"},
		},
		{
			name:    "the record vanished meanwhile: claimed on the second try",
			updates: []func() (*dynamodb.UpdateItemOutput, error){refuse(expired), func() (*dynamodb.UpdateItemOutput, error) { return &dynamodb.UpdateItemOutput{}, nil }},
			puts: []func() (*dynamodb.PutItemOutput, error){func() (*dynamodb.PutItemOutput, error) {
				return nil, ccf(nil)
			}},
			want:      storage.ClaimResult{Claimed: true},
			wantCalls: []string{"UpdateItem", "PutItem", "GetItem", "UpdateItem"},
		},
		{
			name:      "another claim won meanwhile, no item returned: the read finds its record",
			updates:   []func() (*dynamodb.UpdateItemOutput, error){refuse(expired), refuse(nil)},
			puts:      []func() (*dynamodb.PutItemOutput, error){func() (*dynamodb.PutItemOutput, error) { return nil, ccf(nil) }},
			get:       live,
			want:      storage.ClaimResult{Existing: &liveRec},
			wantCalls: []string{"UpdateItem", "PutItem", "GetItem", "UpdateItem", "GetItem"},
		},
		{
			// The SDK retried the replacement after a lost response: its
			// condition fails on the record it wrote.
			name:      "lost response of the replacement",
			updates:   []func() (*dynamodb.UpdateItemOutput, error){refuse(expired)},
			puts:      []func() (*dynamodb.PutItemOutput, error){func() (*dynamodb.PutItemOutput, error) { return nil, ccf(inProgressItem(ourLease, 1)) }},
			want:      storage.ClaimResult{Claimed: true},
			wantCalls: []string{"UpdateItem", "PutItem"},
		},
		{
			name:      "lost response of the replacement, no item returned: the read finds our lease",
			updates:   []func() (*dynamodb.UpdateItemOutput, error){refuse(expired)},
			puts:      []func() (*dynamodb.PutItemOutput, error){func() (*dynamodb.PutItemOutput, error) { return nil, ccf(nil) }},
			get:       inProgressItem(ourLease, 1),
			want:      storage.ClaimResult{Claimed: true},
			wantCalls: []string{"UpdateItem", "PutItem", "GetItem"},
		},
		{
			name:    "changing twice: an error",
			updates: []func() (*dynamodb.UpdateItemOutput, error){refuse(expired), refuse(expired)},
			puts: []func() (*dynamodb.PutItemOutput, error){
				func() (*dynamodb.PutItemOutput, error) { return nil, ccf(expired) },
				func() (*dynamodb.PutItemOutput, error) { return nil, ccf(expired) },
			},
			wantMsg:   "dynamostore: claim: refused twice, but no live record was found",
			wantCalls: []string{"UpdateItem", "PutItem", "UpdateItem", "PutItem"},
		},
		{
			name:      "the replacement fails",
			updates:   []func() (*dynamodb.UpdateItemOutput, error){refuse(expired)},
			puts:      []func() (*dynamodb.PutItemOutput, error){func() (*dynamodb.PutItemOutput, error) { return nil, errBoom }},
			wantMsg:   "dynamostore: claim: replace a record whose steps the claim may not keep: boom",
			wantCalls: []string{"UpdateItem", "PutItem"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u, p int
			fc := &fakeClient{t: t,
				updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { u++; return tt.updates[u-1]() },
				putItem:    func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { p++; return tt.puts[p-1]() },
				getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: tt.get}, nil
				},
			}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			if tt.wantMsg != "" {
				require.EqualError(t, err, tt.wantMsg)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, res)
			}
			assert.Equal(t, tt.wantCalls, fc.Calls())
		})
	}
}

func refuse(item map[string]types.AttributeValue) func() (*dynamodb.UpdateItemOutput, error) {
	return func() (*dynamodb.UpdateItemOutput, error) { return nil, ccf(item) }
}

func TestAppendStepRequest(t *testing.T) {
	t.Parallel()
	for _, layout := range []struct {
		name    string
		opts    []func(*dynamostore.Options)
		wantKey map[string]string
	}{
		{"default layout", nil, map[string]string{"id": "S(" + testID + ")"}},
		{"composite key", []func(*dynamostore.Options){composed}, map[string]string{"pk": "S(idempotency#orders)", "sk": "S(" + testID + ")"}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			var got *dynamodb.UpdateItemInput
			fc := &fakeClient{t: t, updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				got = in
				return &dynamodb.UpdateItemOutput{}, nil
			}}
			step := storage.Step{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}
			require.NoError(t, dynamostore.New(fc, testTable, layout.opts...).AppendStep(t.Context(), testID, ourLease, step))
			require.NotNil(t, got)
			assert.Equal(t, []string{"UpdateItem"}, fc.Calls(), "one call per step")
			assert.Equal(t, layout.wantKey, showItem(got.Key))
			assert.Equal(t, "SET steps = list_append(if_not_exists(steps, ?), ?)",
				oneLine(resolve(t, got.UpdateExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues)))
			assert.Equal(t, "(lease = S("+ourLease+")) AND (status = S(INPROGRESS))",
				resolve(t, got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues))
			var lists []*types.AttributeValueMemberL
			for _, v := range got.ExpressionAttributeValues {
				if l, ok := v.(*types.AttributeValueMemberL); ok {
					lists = append(lists, l)
				}
			}
			require.Len(t, lists, 2, ":empty and :step")
			if len(lists[0].Value) > 0 {
				lists[0], lists[1] = lists[1], lists[0]
			}
			assert.NotNil(t, lists[0].Value, "an empty list, sent as []")
			assert.Empty(t, lists[0].Value)
			assert.Equal(t, stepsAttr(step), lists[1])
			assert.Empty(t, got.ReturnValues)
		})
	}
}

func TestAppendStepErrors(t *testing.T) {
	t.Parallel()
	tooLarge := &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size to update has exceeded the maximum allowed size"}
	tests := []struct {
		name    string
		err     error
		wantErr error
		wantMsg string
	}{
		{"refused by DynamoDB as too large", tooLarge, storage.ErrTooLarge,
			`dynamostore: append step "charge": idempotent: record too large for the store: api error ValidationException: Item size to update has exceeded the maximum allowed size`},
		{"store error", errBoom, errBoom, `dynamostore: append step "charge": boom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, tt.err }}
			err := dynamostore.New(fc, testTable).AppendStep(t.Context(), testID, ourLease, storage.Step{Name: "charge", Data: []byte("{}")})
			require.EqualError(t, err, tt.wantMsg)
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestAppendStepTooLargeWithoutCall(t *testing.T) {
	t.Parallel()
	fc := &fakeClient{t: t}
	store := dynamostore.New(fc, testTable, func(o *dynamostore.Options) { o.MaxItemBytes = 1000 })
	err := store.AppendStep(t.Context(), testID, ourLease, storage.Step{Name: "big", Data: bytes.Repeat([]byte{'x'}, 1000)})
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Contains(t, err.Error(), `dynamostore: append step "big": idempotent: record too large for the store: the item would be at least`)
	assert.Empty(t, fc.Calls(), "refused without calling DynamoDB")
}

func TestSuspendRequest(t *testing.T) {
	t.Parallel()
	var got *dynamodb.UpdateItemInput
	fc := &fakeClient{t: t, updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		got = in
		return &dynamodb.UpdateItemOutput{}, nil
	}}
	require.NoError(t, dynamostore.New(fc, testTable, composed).Suspend(t.Context(), testID, ourLease, t0.Add(-time.Millisecond)))
	require.NotNil(t, got)
	assert.Equal(t, []string{"UpdateItem"}, fc.Calls())
	assert.Equal(t, map[string]string{"pk": "S(idempotency#orders)", "sk": "S(" + testID + ")"}, showItem(got.Key))
	assert.Equal(t, "SET in_progress_expiration = N(1699999999999), suspended = BOOL(true)",
		oneLine(resolve(t, got.UpdateExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues)))
	assert.Equal(t, "(lease = S("+ourLease+")) AND (status = S(INPROGRESS))",
		resolve(t, got.ConditionExpression, got.ExpressionAttributeNames, got.ExpressionAttributeValues))
	assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, got.ReturnValuesOnConditionCheckFailure)
}

// TestSuspendOutcomes: the outcomes of a failed condition are in
// TestFencedWritesDecideOnTheItem.
func TestSuspendOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     error
		wantErr error
		wantMsg string
	}{
		{name: "suspended"},
		{"store error", errBoom, errBoom, "dynamostore: suspend: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return &dynamodb.UpdateItemOutput{}, tt.err
			}}
			err := dynamostore.New(fc, testTable).Suspend(t.Context(), testID, ourLease, t0)
			if tt.wantMsg == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantMsg)
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestDecodeStepsErrors(t *testing.T) {
	t.Parallel()
	var nilM *types.AttributeValueMemberM
	step := func(m map[string]types.AttributeValue) *types.AttributeValueMemberL {
		return &types.AttributeValueMemberL{Value: []types.AttributeValue{
			stepsAttr(twoSteps[0]).Value[0],
			&types.AttributeValueMemberM{Value: m},
		}}
	}
	tests := []struct {
		name  string
		steps types.AttributeValue
		want  string
	}{
		{"a map", &types.AttributeValueMemberM{}, `"steps" is M, want L`},
		{"a string set", &types.AttributeValueMemberSS{Value: []string{"charge"}}, `"steps" is SS, want L`},
		{"an element not a map", &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "charge"}}},
			`"steps" element 0 is S, want M`},
		{"a nil element", &types.AttributeValueMemberL{Value: []types.AttributeValue{nilM}}, `"steps" element 0 is a nil M, want M`},
		{"no name", step(map[string]types.AttributeValue{"data": &types.AttributeValueMemberB{Value: []byte("x")}}),
			`"steps" element 1: "name" is missing, want S`},
		{"name as N", step(map[string]types.AttributeValue{"name": &types.AttributeValueMemberN{Value: "1"}}),
			`"steps" element 1: "name" is N, want S`},
		{"data as S", step(map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: "x"}, "data": &types.AttributeValueMemberS{Value: "x"}}),
			`"steps" element 1: "data" is S, want B`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			item := inProgressItem("lease-other", t0.Add(time.Minute).UnixMilli())
			item["steps"] = tt.steps
			fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, ccf(item) }}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			assert.Equal(t, "dynamostore: claim: idempotent: corrupt or foreign record: attribute "+tt.want, err.Error())
			assert.Equal(t, storage.ClaimResult{}, res)
		})
	}
}

func TestDecodeStepsUnknownKeysAndEmptyList(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		steps types.AttributeValue
		want  []storage.Step
	}{
		{"empty list", &types.AttributeValueMemberL{}, nil},
		{"a replayed append reads once", stepsAttr(twoSteps[0], twoSteps[1], twoSteps[1], twoSteps[0]), twoSteps},
		{"the same name with another result is kept", stepsAttr(twoSteps[0], storage.Step{Name: "charge", Data: []byte("x")}),
			[]storage.Step{twoSteps[0], {Name: "charge", Data: []byte("x")}}},
		{"unknown keys are ignored", &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"name": &types.AttributeValueMemberS{Value: "charge"}, "at": &types.AttributeValueMemberN{Value: "1"},
		}}}}, []storage.Step{{Name: "charge"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			item := inProgressItem("lease-other", t0.Add(time.Minute).UnixMilli())
			item["steps"] = tt.steps
			fc := &fakeClient{t: t, updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, ccf(item) }}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			require.NoError(t, err)
			require.NotNil(t, res.Existing)
			assert.Equal(t, tt.want, res.Existing.Steps)
		})
	}
}
