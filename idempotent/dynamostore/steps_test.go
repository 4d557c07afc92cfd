package dynamostore_test

import (
	"bytes"
	"errors"
	"slices"
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

// lapsedWithSteps is another owner's INPROGRESS record for the payload
// "fp" (the one newRecord claims), whose lease lapsed at t0 and that holds
// steps: the claim's PutItem refuses it, as the write would drop them.
func lapsedWithSteps(steps ...storage.Step) map[string]types.AttributeValue {
	return withSteps(inProgressItem("lease-other", t0.UnixMilli()-1), steps...)
}

// newItem is newRecord as the claim writes it.
func newItem() map[string]string {
	return map[string]string{
		"id": "S(" + testID + ")", "status": "S(INPROGRESS)", "expiration": "N(1700003600)",
		"in_progress_expiration": "N(1700000001500)", "lease": "S(" + ourLease + ")",
		"validation": "S(fp)", "version": "N(1)",
	}
}

// TestClaimResumesSteps: the claim's PutItem refuses a lapsed record that
// holds steps; when the claim resumes it (the same payload), a second
// PutItem writes the new record with the steps as read, on condition that
// the record is still exactly as read, its number of steps included. This
// costs one call more than a claim.
func TestClaimResumesSteps(t *testing.T) {
	t.Parallel()
	suspended := lapsedWithSteps(twoSteps...)
	suspended["suspended"] = &types.AttributeValueMemberBOOL{Value: true}
	unbound := lapsedWithSteps(twoSteps...)
	delete(unbound, "validation")
	tests := []struct {
		name string
		old  map[string]types.AttributeValue
		rec  func(*storage.Record)
		want storage.ClaimResult
	}{
		{
			name: "takeover for the same payload",
			old:  lapsedWithSteps(twoSteps...),
			want: storage.ClaimResult{Claimed: true, TookOver: true, Steps: twoSteps},
		},
		{
			name: "resume of a suspended record",
			old:  suspended,
			want: storage.ClaimResult{Claimed: true, Resumed: true, Steps: twoSteps},
		},
		{
			name: "no fingerprint on either side",
			old:  unbound,
			rec:  func(r *storage.Record) { r.Fingerprint = "" },
			want: storage.ClaimResult{Claimed: true, TookOver: true, Steps: twoSteps},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var puts []*dynamodb.PutItemInput
			fc := &fakeClient{t: t, putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				puts = append(puts, in)
				if len(puts) == 1 {
					return nil, ccf(tt.old)
				}
				return &dynamodb.PutItemOutput{Attributes: tt.old}, nil
			}}
			rec := newRecord()
			if tt.rec != nil {
				tt.rec(&rec)
			}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), rec, t0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res)
			assert.Equal(t, []string{"PutItem", "PutItem"}, fc.Calls(), "resuming steps costs one call more than a claim")
			require.Len(t, puts, 2)
			put := puts[1]
			wantItem := newItem()
			if rec.Fingerprint == "" {
				delete(wantItem, "validation")
			}
			wantItem["steps"] = "?"
			assert.Equal(t, wantItem, showItem(put.Item), "the new record, with the steps")
			assert.Same(t, tt.old["steps"], put.Item["steps"], "the steps as read")
			assert.Equal(t, "lease = S(lease-other) AND status = S(INPROGRESS) AND expiration = N(1700003600) AND "+
				"in_progress_expiration = N(1699999999999) AND size(steps) = N(2)",
				resolve(t, put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues))
			assertAllUsed(t, *put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues)
			assert.Equal(t, types.ReturnValueAllOld, put.ReturnValues)
			assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, put.ReturnValuesOnConditionCheckFailure)
		})
	}
}

// TestClaimResumedStepsCorrupt: steps that cannot be read are not resumed:
// the claim fails and writes nothing. A claim that would drop them replaces
// the record as it would any other (TestClaimReplacesStepsItMayNotKeep).
func TestClaimResumedStepsCorrupt(t *testing.T) {
	t.Parallel()
	old := inProgressItem("lease-other", t0.UnixMilli()-1)
	old["steps"] = &types.AttributeValueMemberS{Value: "charge"}
	fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(old) }}
	res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.EqualError(t, err, `dynamostore: claim: the resumed record's steps: idempotent: corrupt or foreign record: attribute "steps" is S, want L`)
	assert.Equal(t, storage.ClaimResult{}, res)
	assert.Equal(t, []string{"PutItem"}, fc.Calls(), "nothing written")
}

func TestClaimRefusedWithSteps(t *testing.T) {
	t.Parallel()
	live := withSteps(inProgressItem("lease-other", t0.Add(time.Minute).UnixMilli()), twoSteps...)
	fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(live) }}
	res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
	require.NoError(t, err)
	require.NotNil(t, res.Existing)
	assert.Equal(t, twoSteps, res.Existing.Steps)
	assert.False(t, res.Claimed)
	assert.Equal(t, []string{"PutItem"}, fc.Calls())
}

// TestClaimDropsExpiredSteps: an expired record's steps die with it: the
// claim's PutItem replaces it at once, whatever it holds.
func TestClaimDropsExpiredSteps(t *testing.T) {
	t.Parallel()
	expired := withSteps(inProgressItem("lease-other", t0.Add(-2*time.Hour).UnixMilli()), twoSteps...)
	expired["expiration"] = &types.AttributeValueMemberN{Value: itoa(t0.Add(-time.Hour).Unix())}
	expiredCompleted := withSteps(storedItem(), twoSteps...)
	expiredCompleted["expiration"] = &types.AttributeValueMemberN{Value: itoa(t0.Unix() - 1)}
	for _, tt := range []struct {
		name string
		old  map[string]types.AttributeValue
		want storage.ClaimResult
	}{
		{"expired in progress", expired, storage.ClaimResult{Claimed: true, TookOver: true}},
		{"expired completed", expiredCompleted, storage.ClaimResult{Claimed: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{t: t, putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				if _, ok := in.Item["steps"]; ok {
					return nil, errors.New("fake: the claim writes steps")
				}
				return &dynamodb.PutItemOutput{Attributes: tt.old}, nil
			}}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res)
			assert.Equal(t, []string{"PutItem"}, fc.Calls())
		})
	}
}

// TestClaimReplacesStepsItMayNotKeep: the claim condition refuses a lapsed
// record that holds steps; when the claim may replace it but not keep them
// (a compatible but not the same payload), a second PutItem writes the new
// record without them, conditioned on the record as read (the steps need no
// comparison: they are dropped).
func TestClaimReplacesStepsItMayNotKeep(t *testing.T) {
	t.Parallel()
	otherPayload := lapsedWithSteps(twoSteps...)
	delete(otherPayload, "validation") // the lapsed owner had no fingerprint: the liveness rule lets any claim take over
	suspendedOtherPayload := lapsedWithSteps(twoSteps...)
	delete(suspendedOtherPayload, "validation")
	suspendedOtherPayload["suspended"] = &types.AttributeValueMemberBOOL{Value: true}
	corruptSteps := inProgressItem("lease-other", t0.UnixMilli()-1)
	delete(corruptSteps, "validation")
	corruptSteps["steps"] = &types.AttributeValueMemberS{Value: "charge"}
	const wantCond = "lease = S(lease-other) AND status = S(INPROGRESS) AND expiration = N(1700003600) AND " +
		"in_progress_expiration = N(1699999999999)"

	tests := []struct {
		name string
		old  map[string]types.AttributeValue
		unfp bool // the claim carries no fingerprint
		want storage.ClaimResult
	}{
		{
			name: "lapsed, without a fingerprint",
			old:  otherPayload,
			want: storage.ClaimResult{Claimed: true, TookOver: true},
		},
		{
			// Suspended by its owner: the claim resumes the record (without
			// its steps, for another payload), it does not take it over.
			name: "suspended, without a fingerprint",
			old:  suspendedOtherPayload,
			want: storage.ClaimResult{Claimed: true, Resumed: true},
		},
		{
			name: "a claim without a fingerprint",
			old:  lapsedWithSteps(twoSteps...),
			unfp: true,
			want: storage.ClaimResult{Claimed: true, TookOver: true},
		},
		{
			// Steps that cannot be read do not keep the record from being
			// replaced: they are dropped unread.
			name: "steps that cannot be read",
			old:  corruptSteps,
			want: storage.ClaimResult{Claimed: true, TookOver: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var puts []*dynamodb.PutItemInput
			fc := &fakeClient{t: t, putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				puts = append(puts, in)
				if len(puts) == 1 {
					return nil, ccf(tt.old)
				}
				return &dynamodb.PutItemOutput{Attributes: tt.old}, nil
			}}
			rec := newRecord()
			wantItem := newItem()
			if tt.unfp {
				rec.Fingerprint = ""
				delete(wantItem, "validation")
			}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), rec, t0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res)
			assert.Equal(t, []string{"PutItem", "PutItem"}, fc.Calls(), "one call more, in this rare case only")
			require.Len(t, puts, 2)
			put := puts[1]
			assert.Equal(t, wantItem, showItem(put.Item), "the new record, without steps")
			assert.Equal(t, wantCond, resolve(t, put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues))
			assertAllUsed(t, *put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues)
			assert.Equal(t, types.ReturnValueAllOld, put.ReturnValues)
			assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, put.ReturnValuesOnConditionCheckFailure)
		})
	}
}

// TestClaimReplacementRaces: the second write fails its condition when the
// record changed since the claim read it; the claim is then decided again on
// the record as it is. Each case runs with the item returned with a failed
// condition and, through one consistent GetItem, without it.
func TestClaimReplacementRaces(t *testing.T) {
	t.Parallel()
	lapsed := lapsedWithSteps(twoSteps...)
	threeSteps := append(slices.Clone(twoSteps), storage.Step{Name: "email"})
	lapsedMore := lapsedWithSteps(threeSteps...) // the lapsed owner appended a step meanwhile
	suspended := lapsedWithSteps(twoSteps...)    // the lapsed owner suspended it meanwhile
	suspended["in_progress_expiration"] = &types.AttributeValueMemberN{Value: itoa(t0.UnixMilli() - 2)}
	suspended["suspended"] = &types.AttributeValueMemberBOOL{Value: true}
	live := inProgressItem("lease-third", t0.Add(time.Minute).UnixMilli())
	liveRec := storage.Record{ID: testID, Status: storage.StatusInProgress, ExpiresAt: time.Unix(1_700_003_600, 0),
		LeaseExpiresAt: time.UnixMilli(t0.Add(time.Minute).UnixMilli()), Lease: "lease-third", Fingerprint: "fp", Version: 1}
	ours := withSteps(inProgressItem(ourLease, t0.Add(time.Minute).UnixMilli()), twoSteps...)

	// An answer is a PutItem's error (nil: success, the old item being
	// ALL_OLD), with the item a failed condition carries.
	type answer struct {
		ok   bool
		item map[string]types.AttributeValue
	}
	refused := func(item map[string]types.AttributeValue) answer { return answer{item: item} }
	written := func(old map[string]types.AttributeValue) answer { return answer{ok: true, item: old} }

	tests := []struct {
		name      string
		puts      []answer
		want      storage.ClaimResult
		wantMsg   string
		wantCalls []string // PutItem calls; a GetItem follows each refused one without the item
		wantSizes []string // the :old_steps of each replacement
	}{
		{
			name:      "another claim won meanwhile: refused with its record",
			puts:      []answer{refused(lapsed), refused(live), refused(live)},
			want:      storage.ClaimResult{Existing: &liveRec},
			wantSizes: []string{"2"},
		},
		{
			name:      "the record vanished meanwhile: claimed on the second try",
			puts:      []answer{refused(lapsed), refused(nil), written(nil)},
			want:      storage.ClaimResult{Claimed: true},
			wantSizes: []string{"2"},
		},
		{
			name:      "the lapsed owner appended a step meanwhile: resumed with it",
			puts:      []answer{refused(lapsed), refused(lapsedMore), refused(lapsedMore), written(lapsedMore)},
			want:      storage.ClaimResult{Claimed: true, TookOver: true, Steps: threeSteps},
			wantSizes: []string{"2", "3"},
		},
		{
			name:      "the lapsed owner suspended it meanwhile: resumed",
			puts:      []answer{refused(lapsed), refused(suspended), refused(suspended), written(suspended)},
			want:      storage.ClaimResult{Claimed: true, Resumed: true, Steps: twoSteps},
			wantSizes: []string{"2", "2"},
		},
		{
			// The SDK sent the replacement again after its response was
			// lost: its condition fails on the record it wrote.
			name:      "lost response of the replacement",
			puts:      []answer{refused(lapsed), refused(ours)},
			want:      storage.ClaimResult{Claimed: true, Steps: twoSteps},
			wantSizes: []string{"2"},
		},
		{
			name:      "changing twice: an error",
			puts:      []answer{refused(lapsed), refused(lapsedMore), refused(lapsed), refused(lapsedMore)},
			wantMsg:   "dynamostore: claim: refused twice, but no live record was found",
			wantSizes: []string{"2", "2"},
		},
	}
	for _, tt := range tests {
		for _, returned := range []bool{true, false} {
			name := tt.name + ", item returned"
			if !returned {
				name = tt.name + ", no item returned"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var p int
				var sizes []string
				var read map[string]types.AttributeValue // what the fallback read finds
				var wantCalls []string
				fc := &fakeClient{t: t,
					putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
						if n, ok := in.ExpressionAttributeValues[":old_steps"].(*types.AttributeValueMemberN); ok {
							sizes = append(sizes, n.Value)
						}
						a := tt.puts[p]
						p++
						if a.ok {
							return &dynamodb.PutItemOutput{Attributes: a.item}, nil
						}
						read = a.item
						if !returned {
							return nil, ccf(nil)
						}
						return nil, ccf(a.item)
					},
					getItem: func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						if in.ConsistentRead == nil || !*in.ConsistentRead {
							return nil, errors.New("fake: the fallback read is not consistent")
						}
						return &dynamodb.GetItemOutput{Item: read}, nil
					},
				}
				for _, a := range tt.puts {
					wantCalls = append(wantCalls, "PutItem")
					if !a.ok && (!returned || len(a.item) == 0) {
						wantCalls = append(wantCalls, "GetItem")
					}
				}
				res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
				if tt.wantMsg != "" {
					require.EqualError(t, err, tt.wantMsg)
				} else {
					require.NoError(t, err)
					assert.Equal(t, tt.want, res)
				}
				assert.Equal(t, wantCalls, fc.Calls())
				assert.Equal(t, tt.wantSizes, sizes)
			})
		}
	}
}

func TestClaimReplacementFails(t *testing.T) {
	t.Parallel()
	fc := &fakeClient{t: t, putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		if in.ExpressionAttributeValues[":old_lease"] == nil {
			return nil, ccf(lapsedWithSteps(twoSteps...))
		}
		return nil, errBoom
	}}
	_, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
	require.EqualError(t, err, "dynamostore: claim: replace a lapsed record that holds steps: boom")
	require.ErrorIs(t, err, errBoom)
	assert.Equal(t, []string{"PutItem", "PutItem"}, fc.Calls())
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
			assert.Equal(t, "lease = S("+ourLease+") AND status = S(INPROGRESS)",
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
	assert.Equal(t, "lease = S("+ourLease+") AND status = S(INPROGRESS)",
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
			fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(item) }}
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
			fc := &fakeClient{t: t, putItem: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(item) }}
			res, err := dynamostore.New(fc, testTable).Claim(t.Context(), newRecord(), t0)
			require.NoError(t, err)
			require.NotNil(t, res.Existing)
			assert.Equal(t, tt.want, res.Existing.Steps)
		})
	}
}
