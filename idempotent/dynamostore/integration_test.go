package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// Integration tests against DynamoDB Local. Record times lie in the real
// future, so DynamoDB Local's TTL (which deletes expired items within about a
// second) never removes a record under a running test.

func TestConformance(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, table := newLocalStore(t, client, l)
			storetest.Run(t, store)
			storetest.RunAdmin(t, store, func(ctx context.Context, id string) error {
				// A status of the wrong type, under the layout's key.
				item := map[string]types.AttributeValue{"status": &types.AttributeValueMemberN{Value: "1"}}
				if l.composite {
					item["pk"] = &types.AttributeValueMemberS{Value: store.Options().StaticPartitionKey}
					item["sk"] = &types.AttributeValueMemberS{Value: id}
				} else {
					item["id"] = &types.AttributeValueMemberS{Value: id}
				}
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item})
				return err
			})
		})
	}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "itest#" + hex.EncodeToString(b[:])
}

// liveRecord is a fresh INPROGRESS record claimed at now.
func liveRecord(now time.Time) storage.Record {
	return storage.Record{
		ID:             randomID(),
		Status:         storage.StatusInProgress,
		ExpiresAt:      now.Add(time.Hour),
		LeaseExpiresAt: now.Add(90 * time.Second).Add(123 * time.Millisecond),
		Lease:          randomID()[6:],
		Fingerprint:    "fp-" + randomID()[6:],
		Version:        storage.RecordVersion,
	}
}

func rawItem(t *testing.T, client *dynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

func TestLocalItemLayout(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, table := newLocalStore(t, client, l)
			now := time.Now()
			rec := liveRecord(now)
			dbKey := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: rec.ID}}
			if l.composite {
				dbKey = map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: store.Options().StaticPartitionKey},
					"sk": &types.AttributeValueMemberS{Value: rec.ID},
				}
			}
			key := showItem(dbKey)

			res, err := store.Claim(t.Context(), rec, now)
			require.NoError(t, err)
			require.True(t, res.Claimed)
			want := map[string]string{
				"status":                 "S(INPROGRESS)",
				"expiration":             "N(" + strconv.FormatInt(rec.ExpiresAt.Unix(), 10) + ")",
				"in_progress_expiration": "N(" + strconv.FormatInt(rec.LeaseExpiresAt.UnixMilli(), 10) + ")",
				"lease":                  "S(" + rec.Lease + ")",
				"validation":             "S(" + rec.Fingerprint + ")",
				"version":                "N(1)",
			}
			for k, v := range key {
				want[k] = v
			}
			assert.Equal(t, want, showItem(rawItem(t, client, table, dbKey)))

			// Steps: a list of maps {name: S, data: B}, in order.
			steps := []storage.Step{{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}, {Name: "ledger"}}
			for _, st := range steps {
				require.NoError(t, store.AppendStep(t.Context(), rec.ID, rec.Lease, st))
			}
			item := rawItem(t, client, table, dbKey)
			assert.Equal(t, &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
					"name": &types.AttributeValueMemberS{Value: "charge"},
					"data": &types.AttributeValueMemberB{Value: []byte(`{"id":"ch_1"}`)},
				}},
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
					"name": &types.AttributeValueMemberS{Value: "ledger"},
				}},
			}}, item["steps"])
			delete(item, "steps")
			assert.Equal(t, want, showItem(item), "appending steps changes nothing else")

			// Suspending sets the lease end and marks the record suspended.
			end := now.Add(-time.Millisecond)
			require.NoError(t, store.Suspend(t.Context(), rec.ID, rec.Lease, end))
			item = rawItem(t, client, table, dbKey)
			assert.NotNil(t, item["steps"])
			delete(item, "steps")
			want["in_progress_expiration"] = "N(" + strconv.FormatInt(end.UnixMilli(), 10) + ")"
			want["suspended"] = "BOOL(true)"
			assert.Equal(t, want, showItem(item))

			// A resume for the same payload rewrites every attribute but
			// the steps, and removes the suspended mark.
			b := rec
			b.Lease, b.LeaseExpiresAt, b.ExpiresAt = randomID()[6:], now.Add(time.Minute), now.Add(90*time.Minute)
			res, err = store.Claim(t.Context(), b, now)
			require.NoError(t, err)
			assert.Equal(t, storage.ClaimResult{Claimed: true, Resumed: true, Steps: steps}, res)
			delete(want, "suspended")
			want["lease"] = "S(" + b.Lease + ")"
			want["in_progress_expiration"] = "N(" + strconv.FormatInt(b.LeaseExpiresAt.UnixMilli(), 10) + ")"
			want["expiration"] = "N(" + strconv.FormatInt(b.ExpiresAt.Unix(), 10) + ")"
			item = rawItem(t, client, table, dbKey)
			assert.Len(t, item["steps"].(*types.AttributeValueMemberL).Value, 2)
			delete(item, "steps")
			assert.Equal(t, want, showItem(item))
			rec = b

			done := rec
			done.Status, done.LeaseExpiresAt, done.Data, done.ExpiresAt = storage.StatusCompleted, time.Time{}, []byte("p{}"), now.Add(2*time.Hour)
			require.NoError(t, store.Complete(t.Context(), done))
			delete(want, "in_progress_expiration")
			want["status"] = "S(COMPLETED)"
			want["data"] = "B(p{})"
			want["expiration"] = "N(" + strconv.FormatInt(done.ExpiresAt.Unix(), 10) + ")"
			assert.Equal(t, want, showItem(rawItem(t, client, table, dbKey)), "completion removes the steps")
		})
	}
}

// TestLocalStepsPastTheItemLimit: steps that fit alone but not together are
// refused by DynamoDB, without writing, as storage.ErrTooLarge; the record
// keeps the steps before and completes.
func TestLocalStepsPastTheItemLimit(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newLocalStore(t, client, l)
			now := time.Now()
			rec := liveRecord(now)
			_, err := store.Claim(t.Context(), rec, now)
			require.NoError(t, err)
			big := func(name string) storage.Step {
				return storage.Step{Name: name, Data: bytes.Repeat([]byte{'x'}, 150<<10)}
			}
			require.NoError(t, store.AppendStep(t.Context(), rec.ID, rec.Lease, big("one")))
			require.NoError(t, store.AppendStep(t.Context(), rec.ID, rec.Lease, big("two")))
			err = store.AppendStep(t.Context(), rec.ID, rec.Lease, big("three"))
			require.ErrorIs(t, err, storage.ErrTooLarge)
			assert.ErrorContains(t, err, "ValidationException", "refused by DynamoDB: the store does not know the stored steps' size")

			b := rival(rec, now)
			got, err := store.Get(t.Context(), rec.ID)
			require.NoError(t, err)
			require.Len(t, got.Steps, 2, "nothing written")
			assert.Equal(t, []string{"one", "two"}, []string{got.Steps[0].Name, got.Steps[1].Name})
			done := rec
			done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p{}")
			require.NoError(t, store.Complete(t.Context(), done))
			res, err := store.Claim(t.Context(), b, now)
			require.NoError(t, err)
			require.NotNil(t, res.Existing)
			assert.Empty(t, res.Existing.Steps)
		})
	}
}

// rival is another invocation's claim of r's record, with its own lease.
func rival(r storage.Record, now time.Time) storage.Record {
	r.Lease = randomID()[6:]
	r.LeaseExpiresAt = now.Add(time.Minute)
	return r
}

// TestLocalReplacingSteps: the claim's PutItem refuses a lapsed record that
// holds steps; a second, conditional PutItem then resumes it (keeping the
// steps, for the same payload) or replaces it without them (another,
// compatible payload). An expired record's steps die with it: the claim
// alone replaces it. A record that changes between the refused claim and
// the second write fails its condition, and the claim is decided again on
// the record as it is then; a second write sent again by the SDK after its
// response was lost finds its own record: claimed, with the steps. Each case
// runs on both layouts, with the item returned with a failed condition and
// without it (see dropConditionItem).
func TestLocalReplacingSteps(t *testing.T) {
	t.Parallel()
	step := storage.Step{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}
	step2 := storage.Step{Name: "ledger", Data: []byte("2")}
	for _, stripped := range []bool{false, true} {
		variant := "item returned"
		if stripped {
			variant = "no item returned"
		}
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			counter, interpose, loser := &callCounter{}, &interposer{}, &responseLoser{}
			mws := []func(*middleware.Stack) error{interpose.apiOption, counter.apiOption, loser.apiOption}
			if stripped {
				mws = append(mws, dropConditionItem)
			}
			client := localddbtest.Client(t, withMiddleware(mws...), quickRetries)
			plain := localddbtest.Client(t)
			for _, l := range layouts {
				t.Run(l.name, func(t *testing.T) {
					// Not parallel: the cases share the call counter.
					store, table := newLocalStore(t, client, l)
					var opts []func(*dynamostore.Options)
					if l.composite {
						opts = append(opts, compositeOptions)
					}
					setup := dynamostore.New(plain, table, opts...) // the other invocations, uncounted
					now := time.Now()
					later := now.Add(2 * time.Minute) // past liveRecord's lease, long before its expiry
					for _, tt := range []struct {
						name string
						at   time.Time
						// before prepares the record (rec holds step); change,
						// if set, changes it right before the second write.
						before, change func(t *testing.T, rec storage.Record)
						claim          func(*storage.Record)
						loseResponse   bool
						// want is the result (Existing: the stored record's
						// lease and steps are checked instead).
						want        storage.ClaimResult
						wantRefused bool
						wantLease   string // "": the claim's; "old": the first owner's; else the rival's
						wantSteps   []storage.Step
						// wantCalls are the calls with the item returned; a
						// "PutItem!" is refused, and a GetItem follows it
						// without the item.
						wantCalls []string
					}{
						{
							name:      "resumed",
							at:        later,
							want:      storage.ClaimResult{Claimed: true, TookOver: true, Steps: []storage.Step{step}},
							wantSteps: []storage.Step{step},
							wantCalls: []string{"PutItem!", "PutItem"},
						},
						{
							name: "suspended, resumed",
							at:   later,
							before: func(t *testing.T, rec storage.Record) {
								require.NoError(t, setup.Suspend(t.Context(), rec.ID, rec.Lease, now))
							},
							want:      storage.ClaimResult{Claimed: true, Resumed: true, Steps: []storage.Step{step}},
							wantSteps: []storage.Step{step},
							wantCalls: []string{"PutItem!", "PutItem"},
						},
						{
							name:      "another payload: replaced without the steps",
							at:        later,
							claim:     func(r *storage.Record) { r.Fingerprint = "" },
							want:      storage.ClaimResult{Claimed: true, TookOver: true},
							wantCalls: []string{"PutItem!", "PutItem"},
						},
						{
							name:      "expired: the claim alone replaces it",
							at:        now.Add(2 * time.Hour),
							want:      storage.ClaimResult{Claimed: true, TookOver: true},
							wantCalls: []string{"PutItem"},
						},
						{
							name: "a step appended meanwhile: decided again, resumed with it",
							at:   later,
							change: func(t *testing.T, rec storage.Record) {
								require.NoError(t, setup.AppendStep(t.Context(), rec.ID, rec.Lease, step2))
							},
							want:      storage.ClaimResult{Claimed: true, TookOver: true, Steps: []storage.Step{step, step2}},
							wantSteps: []storage.Step{step, step2},
							wantCalls: []string{"PutItem!", "PutItem!", "PutItem!", "PutItem"},
						},
						{
							name: "suspended meanwhile: decided again, resumed",
							at:   later,
							change: func(t *testing.T, rec storage.Record) {
								require.NoError(t, setup.Suspend(t.Context(), rec.ID, rec.Lease, now))
							},
							want:      storage.ClaimResult{Claimed: true, Resumed: true, Steps: []storage.Step{step}},
							wantSteps: []storage.Step{step},
							wantCalls: []string{"PutItem!", "PutItem!", "PutItem!", "PutItem"},
						},
						{
							name: "another claim resumed it meanwhile: refused by it",
							at:   later,
							change: func(t *testing.T, rec storage.Record) {
								res, err := setup.Claim(t.Context(), rival(rec, later), later)
								require.NoError(t, err)
								require.Equal(t, []storage.Step{step}, res.Steps)
							},
							wantRefused: true,
							wantLease:   "rival",
							wantSteps:   []storage.Step{step},
							wantCalls:   []string{"PutItem!", "PutItem!", "PutItem!"},
						},
						{
							name: "completed meanwhile: refused by the completed record",
							at:   later,
							change: func(t *testing.T, rec storage.Record) {
								done := rec
								done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p{}")
								require.NoError(t, setup.Complete(t.Context(), done))
							},
							wantRefused: true,
							wantLease:   "old",
							wantCalls:   []string{"PutItem!", "PutItem!", "PutItem!"},
						},
						{
							// The SDK sends the second write again: its
							// condition fails on the record it wrote.
							name:         "lost response of the second write",
							at:           later,
							loseResponse: true,
							want:         storage.ClaimResult{Claimed: true, Steps: []storage.Step{step}},
							wantSteps:    []storage.Step{step},
							wantCalls:    []string{"PutItem!", "PutItem", "PutItem!"},
						},
					} {
						rec := liveRecord(now)
						_, err := setup.Claim(t.Context(), rec, now)
						require.NoError(t, err)
						require.NoError(t, setup.AppendStep(t.Context(), rec.ID, rec.Lease, step))
						if tt.before != nil {
							tt.before(t, rec)
						}
						b := rival(rec, tt.at)
						b.ExpiresAt = tt.at.Add(time.Hour)
						if tt.claim != nil {
							tt.claim(&b)
						}
						if tt.change != nil {
							interpose.arm(2, func(context.Context) { tt.change(t, rec) })
						}
						if tt.loseResponse {
							loser.arm("PutItem")
						}
						counter.take()
						res, err := store.Claim(t.Context(), b, tt.at)
						interpose.disarm()
						require.NoError(t, err, tt.name)
						got, err := setup.Get(t.Context(), rec.ID)
						require.NoError(t, err, tt.name)
						if tt.wantRefused {
							require.NotNil(t, res.Existing, tt.name)
							assert.False(t, res.Claimed, tt.name)
							assert.Equal(t, got, *res.Existing, tt.name)
						} else {
							assert.Equal(t, tt.want, res, tt.name)
						}
						switch tt.wantLease {
						case "":
							assert.Equal(t, b.Lease, got.Lease, tt.name)
							assert.False(t, got.Suspended, tt.name)
						case "old":
							assert.Equal(t, rec.Lease, got.Lease, tt.name)
						default:
							assert.NotEqual(t, rec.Lease, got.Lease, tt.name)
							assert.NotEqual(t, b.Lease, got.Lease, tt.name)
						}
						assert.Equal(t, tt.wantSteps, got.Steps, tt.name)
						var wantCalls []string
						for _, c := range tt.wantCalls {
							if c == "PutItem!" {
								wantCalls = append(wantCalls, "PutItem")
								if stripped {
									wantCalls = append(wantCalls, "GetItem")
								}
								continue
							}
							wantCalls = append(wantCalls, c)
						}
						assert.Equal(t, wantCalls, counter.take(), tt.name)
					}
				})
			}
		})
	}
}

// interposer is an SDK middleware that runs a function before the nth
// PutItem call after arm (in the Initialize step: once per call, before the
// SDK's retries), as another invocation's write landing at that moment.
type interposer struct {
	mu sync.Mutex
	n  int
	fn func(context.Context)
}

func (ip *interposer) arm(n int, fn func(context.Context)) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	ip.n, ip.fn = n, fn
}

func (ip *interposer) disarm() { ip.arm(0, nil) }

func (ip *interposer) apiOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("idemkitInterposer",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			var run func(context.Context)
			if _, isPut := in.Parameters.(*dynamodb.PutItemInput); isPut {
				ip.mu.Lock()
				if ip.fn != nil {
					if ip.n--; ip.n == 0 {
						run, ip.fn = ip.fn, nil
					}
				}
				ip.mu.Unlock()
			}
			if run != nil {
				run(ctx)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func TestLocalLostResponses(t *testing.T) {
	t.Parallel()
	counter := &callCounter{}
	loser := &responseLoser{}
	client := localddbtest.Client(t, withMiddleware(counter.apiOption, loser.apiOption), quickRetries)
	store, _ := newLocalStore(t, client, layouts[0])
	now := time.Now()
	rec := liveRecord(now)
	counter.take()

	// The claim is written, its response lost, the SDK retries, the retry
	// finds our own lease, which the condition admits: the claim is ours.
	loser.arm("PutItem")
	res, err := store.Claim(t.Context(), rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true}, res)
	assert.Equal(t, []string{"PutItem", "PutItem"}, counter.take())

	// A retried completion succeeds again (it is fenced by the lease alone).
	done := rec
	done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("p1")
	loser.arm("UpdateItem")
	require.NoError(t, store.Complete(t.Context(), done))
	assert.Equal(t, []string{"UpdateItem", "UpdateItem"}, counter.take())

	// A retried release finds the item gone: released.
	rec2 := liveRecord(now)
	_, err = store.Claim(t.Context(), rec2, now)
	require.NoError(t, err)
	counter.take()
	loser.arm("DeleteItem")
	require.NoError(t, store.Release(t.Context(), rec2.ID, rec2.Lease))
	assert.Equal(t, []string{"DeleteItem", "DeleteItem"}, counter.take())
	res, err = store.Claim(t.Context(), liveRecord(now), now)
	require.NoError(t, err)
	assert.True(t, res.Claimed)

	// A takeover that keeps steps, the response of its second write lost:
	// the retry of that write fails its condition on its own record, and
	// gets the kept steps back.
	rec3 := liveRecord(now)
	_, err = store.Claim(t.Context(), rec3, now)
	require.NoError(t, err)
	step := storage.Step{Name: "charge", Data: []byte(`{"id":"ch_1"}`)}
	loser.arm("UpdateItem")
	require.NoError(t, store.AppendStep(t.Context(), rec3.ID, rec3.Lease, step))
	later := rec3.LeaseExpiresAt.Add(time.Millisecond)
	b := rec3
	b.Lease, b.LeaseExpiresAt = randomID()[6:], later.Add(time.Minute)
	counter.take()
	loser.arm("PutItem") // the claim is refused: the second write's response is lost
	res, err = store.Claim(t.Context(), b, later)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, Steps: []storage.Step{step}}, res,
		"the step, written twice by the SDK's retry, reads once and is kept")
	assert.Equal(t, []string{"PutItem", "PutItem", "PutItem"}, counter.take())
}

// TestLocalItemSizeLimit checks the size estimate against DynamoDB's own
// count: with the store's check lifted, an item of exactly 400 KB by the
// estimate is accepted and one byte more is refused by DynamoDB, which the
// store reports as storage.ErrTooLarge too.
func TestLocalItemSizeLimit(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			table := createTable(t, client, l.composite)
			opts := func(limit int) []func(*dynamostore.Options) {
				o := []func(*dynamostore.Options){func(o *dynamostore.Options) { o.MaxItemBytes = limit }}
				if l.composite {
					o = append(o, compositeOptions)
				}
				return o
			}
			checked := dynamostore.New(client, table, opts(0)...)
			unchecked := dynamostore.New(client, table, opts(1<<30)...)
			now := time.Now()

			// fill returns a completion whose item is exactly size bytes
			// by the store's estimate.
			fill := func(s *dynamostore.Store, rec storage.Record, size int) storage.Record {
				done := rec
				done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte{'p'}
				done.Data = bytes.Repeat([]byte{'x'}, size-dynamostore.CompletedSize(s, done)+1)
				return done
			}
			for _, tt := range []struct {
				name  string
				store *dynamostore.Store
				size  int
				fits  bool
			}{
				{"exactly 400 KB fits", checked, storage.DefaultMaxItemBytes, true},
				{"one byte more is refused by the store", checked, storage.DefaultMaxItemBytes + 1, false},
				{"one byte more is refused by DynamoDB", unchecked, storage.DefaultMaxItemBytes + 1, false},
			} {
				rec := liveRecord(now)
				_, err := tt.store.Claim(t.Context(), rec, now)
				require.NoError(t, err)
				err = tt.store.Complete(t.Context(), fill(tt.store, rec, tt.size))
				if tt.fits {
					assert.NoError(t, err, tt.name)
				} else {
					assert.ErrorIs(t, err, storage.ErrTooLarge, tt.name)
				}
				if tt.store == unchecked {
					assert.ErrorContains(t, err, "ValidationException", "refused by DynamoDB, not by the estimate")
				}
			}
		})
	}
}

func TestLocalCorruptRecords(t *testing.T) {
	t.Parallel()
	client := localddbtest.Client(t)
	store, table := newLocalStore(t, client, layouts[0])
	now := time.Now()
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)

	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item})
		require.NoError(t, err)
	}

	// A status stored as a number.
	bad := liveRecord(now)
	put(map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: bad.ID}, "status": &types.AttributeValueMemberN{Value: "1"},
		"expiration": &types.AttributeValueMemberN{Value: exp}, "lease": &types.AttributeValueMemberS{Value: "x"},
	})
	_, err := store.Claim(t.Context(), bad, now)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
	assert.Contains(t, err.Error(), `attribute "status" is N, want S`)

	// A record without a version attribute: version 0, never replayed.
	foreign := liveRecord(now)
	put(map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: foreign.ID}, "status": &types.AttributeValueMemberS{Value: "COMPLETED"},
		"expiration": &types.AttributeValueMemberN{Value: exp}, "lease": &types.AttributeValueMemberS{Value: "x"},
	})
	res, err := store.Claim(t.Context(), foreign, now)
	require.NoError(t, err)
	require.NotNil(t, res.Existing)
	assert.Equal(t, 0, res.Existing.Version, "no version attribute: version 0, refused by the wrapper as foreign")
}
