package batch_test

// The engine's rules, tested once on the fake source (fake_test.go): what
// fails a record and what does not, keys and payloads, the options (their
// rules are documented on sqsbatch's options), duplicates in a batch,
// parallelism, order, time and panics. The sources' own tests check what is
// theirs: decoding, the default key and payload, lanes, the response.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/batch"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// TestOutcomes runs a batch of one record under test and a neighbour, and
// checks which are reported and which orders the handler saw. The neighbour
// must never be affected.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	neighbour := one("n", body("neighbour", 1))
	tests := []struct {
		name      string
		rec       msg
		fake      func(s *fakeStore)
		core      []idempotent.Option
		opts      []option
		wantFail  bool
		wantCalls []string
	}{
		{name: "success", rec: one("m", body("a", 1)), wantCalls: []string{"a", "neighbour"}},
		{name: "handler error", rec: one("m", body("fail", 1)), wantFail: true, wantCalls: []string{"fail", "neighbour"}},
		{name: "handler panic", rec: one("m", body("panic", 1)), wantFail: true, wantCalls: []string{"panic", "neighbour"}},
		{name: "undecodable", rec: one("m", "charge order 7"), wantFail: true, wantCalls: []string{"neighbour"}},
		{name: "Validate fails", rec: one("m", body("a", 0)), wantFail: true, wantCalls: []string{"neighbour"}},
		{
			name: "key function fails", rec: one("m", body("a", 1)),
			opts: []option{batch.WithKey[msg]("fake", func(o order) (string, error) {
				if o.OrderID == "a" {
					return "", errors.New("no key")
				}
				return o.OrderID, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "key function panics", rec: one("m", body("a", 1)),
			opts: []option{batch.WithKey[msg]("fake", func(o order) (string, error) {
				if o.OrderID == "a" {
					panic("key bug")
				}
				return o.OrderID, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "record key function fails", rec: one("m", body("a", 1)),
			opts: []option{batch.WithRecordKey("fake", func(m msg) (string, error) {
				if m.ID == "m" {
					return "", errors.New("no key")
				}
				return m.ID, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "payload function panics", rec: one("m", body("a", 1)),
			opts: []option{batch.WithPayloadValidation[msg]("fake", func(o order) (any, error) {
				if o.OrderID == "a" {
					panic("payload bug")
				}
				return o, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "payload function fails", rec: one("m", body("a", 1)),
			opts: []option{batch.WithRecordPayloadValidation("fake", func(m msg) (any, error) {
				if m.ID == "m" {
					return nil, errors.New("no payload")
				}
				return m.Body, nil
			})},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "empty key", rec: one("m", body("", 1)),
			opts:     []option{batch.WithKey[msg]("fake", byOrderID)},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "empty default key", rec: one("", body("a", 1)),
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "empty key with idempotent.WithOptionalKey runs without idempotency", rec: one("m", body("", 1)),
			core:      []idempotent.Option{idempotent.WithOptionalKey()},
			opts:      []option{batch.WithKey[msg]("fake", byOrderID)},
			wantCalls: []string{"", "neighbour"},
		},
		{
			name: "key too long", rec: one("m", body(strings.Repeat("k", 1024+1), 1)),
			opts:     []option{batch.WithKey[msg]("fake", byOrderID)},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "in progress elsewhere", rec: one("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", refuseWith(func(*storage.Record) {}), s.mem)
			},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "store error on claim", rec: one("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", func(context.Context, storage.Record, time.Time) (storage.ClaimResult, error) {
					return storage.ClaimResult{}, errThrottled
				}, s.mem)
			},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "corrupt record", rec: one("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", refuseWith(func(r *storage.Record) { r.Version = 99 }), s.mem)
			},
			wantFail: true, wantCalls: []string{"neighbour"},
		},
		{
			name: "completed without a stored response counts as done", rec: one("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.claim = onlyFor("m", refuseWith(func(r *storage.Record) {
					r.Status, r.Data = storage.StatusCompleted, []byte("n")
				}), s.mem)
			},
			wantCalls: []string{"neighbour"},
		},
		{
			name: "handler succeeded but completion failed", rec: one("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.complete = func(context.Context, storage.Record) error { return errThrottled }
			},
			wantCalls: []string{"a", "neighbour"},
		},
		{
			name: "handler succeeded but the lease was lost", rec: one("m", body("a", 1)),
			fake: func(s *fakeStore) {
				s.complete = func(context.Context, storage.Record) error { return storage.ErrLeaseLost }
			},
			wantCalls: []string{"a", "neighbour"},
		},
		{
			name: "handler failed and release failed", rec: one("m", body("fail", 1)),
			fake: func(s *fakeStore) {
				s.release = func(context.Context, string, string) error { return errThrottled }
			},
			wantFail: true, wantCalls: []string{"fail", "neighbour"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &fakeStore{mem: idempotent.NewMemoryStore()}
			if tt.fake != nil {
				tt.fake(store)
			}
			r := newRecorder()
			h := wrap(newEngine(store, tt.core...), r.handle, tt.opts...)

			failed := h(context.Background(), []msg{tt.rec, neighbour})
			want := []string{}
			if tt.wantFail {
				want = []string{tt.rec.ID}
			}
			assert.ElementsMatch(t, want, failed)
			assert.ElementsMatch(t, tt.wantCalls, r.Calls())
		})
	}
}

// TestRedelivery runs two batches against one store: the second holds a
// redelivery or a duplicate of the first's record.
func TestRedelivery(t *testing.T) {
	t.Parallel()
	byAttr := batch.WithRecordKey("fake", func(m msg) (string, error) { return strings.TrimSuffix(m.ID, "-again"), nil })
	tests := []struct {
		name          string
		first, second msg
		opts          []option
		core          []idempotent.Option // the Engine of the second batch
		firstCore     []idempotent.Option // the Engine of the first batch, when not core
		wantFail      []string            // of the second batch
		wantCalls     []string            // over both batches
	}{
		{
			name:  "same record redelivered is replayed",
			first: one("m1", body("a", 1)), second: one("m1", body("a", 1)),
			wantCalls: []string{"a"},
		},
		{
			name:  "new record, same order, is replayed under a key of the value",
			first: one("m1", body("a", 1)), second: one("m2", body("a", 1)),
			opts:      []option{batch.WithKey[msg]("fake", byOrderID)},
			wantCalls: []string{"a"},
		},
		{
			name:  "same order with another amount is a payload mismatch",
			first: one("m1", body("a", 1)), second: one("m2", body("a", 2)),
			opts:     []option{batch.WithKey[msg]("fake", byOrderID)},
			wantFail: []string{"m2"}, wantCalls: []string{"a"},
		},
		{
			name:  "WithoutPayloadValidation replays whatever the body",
			first: one("m1", body("a", 1)), second: one("m2", body("a", 2)),
			opts:      []option{batch.WithKey[msg]("fake", byOrderID), batch.WithoutPayloadValidation[msg]()},
			wantCalls: []string{"a"},
		},
		{
			name:  "WithPayloadValidation narrows what must match",
			first: one("m1", body("a", 1)), second: one("m2", body("a", 2)),
			opts: []option{
				batch.WithKey[msg]("fake", byOrderID),
				batch.WithPayloadValidation[msg]("fake", func(o order) (any, error) { return o.OrderID, nil }),
			},
			wantCalls: []string{"a"},
		},
		{
			name:  "WithRecordPayloadValidation compares the raw record",
			first: one("m1", body("a", 1)), second: one("m2", `{"amount":1,"orderId":"a"}`),
			opts: []option{
				batch.WithKey[msg]("fake", byOrderID),
				batch.WithRecordPayloadValidation("fake", func(m msg) (any, error) { return m.Body, nil }),
			},
			wantFail: []string{"m2"}, wantCalls: []string{"a"},
		},
		{
			name:  "the last payload option wins",
			first: one("m1", body("a", 1)), second: one("m2", body("a", 2)),
			opts: []option{
				batch.WithKey[msg]("fake", byOrderID),
				batch.WithoutPayloadValidation[msg](),
				batch.WithRecordPayloadValidation("fake", func(m msg) (any, error) { return m.Body, nil }),
			},
			wantFail: []string{"m2"}, wantCalls: []string{"a"},
		},
		{
			name:  "WithRecordKey keys on the raw record",
			first: one("m1", body("a", 1)), second: one("m1-again", body("a", 1)),
			opts:      []option{byAttr},
			wantCalls: []string{"a"},
		},
		{
			name:  "the last key option wins",
			first: one("m1", body("a", 1)), second: one("m2", body("a", 1)),
			opts:      []option{byAttr, batch.WithKey[msg]("fake", byOrderID)},
			wantCalls: []string{"a"},
		},
		{
			name:  "a failed record runs again",
			first: one("m1", body("fail", 1)), second: one("m1", body("fail", 1)),
			wantFail: []string{"m1"}, wantCalls: []string{"fail", "fail"},
		},
		{
			name:  "a panicked record runs again",
			first: one("m1", body("panic", 1)), second: one("m1", body("panic", 1)),
			wantFail: []string{"m1"}, wantCalls: []string{"panic", "panic"},
		},
		{
			name:  "another prefix is another namespace",
			first: one("m1", body("a", 1)), second: one("m1", body("a", 1)),
			firstCore: []idempotent.Option{idempotent.WithPrefix("first")},
			core:      []idempotent.Option{idempotent.WithPrefix("second")},
			wantCalls: []string{"a", "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := idempotent.NewMemoryStore()
			r := newRecorder()
			firstCore := tt.core
			if tt.firstCore != nil {
				firstCore = tt.firstCore
			}
			wrap(newEngine(store, firstCore...), r.handle, tt.opts...)(context.Background(), []msg{tt.first})

			failed := wrap(newEngine(store, tt.core...), r.handle, tt.opts...)(context.Background(), []msg{tt.second})
			assert.Equal(t, nonNil(tt.wantFail), failed)
			assert.Equal(t, tt.wantCalls, r.Calls())
		})
	}
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// TestProgrammerErrors: a nil Engine, a nil function given to an option, and
// a function of another type than the handler's panic at start-up, naming
// the package, the function and the types.
func TestProgrammerErrors(t *testing.T) {
	t.Parallel()
	handle := newRecorder().handle
	tests := []struct {
		name string
		wrap func()
		want string
	}{
		{"nil Engine", func() { batch.New(nil, "Wrap", source(handle), batch.Settings[msg]{}) }, "fake: Wrap: nil Engine"},
		{"nil key function", func() { batch.WithKey[msg, order]("fake", nil) }, "fake: WithKey: nil function"},
		{"nil record key function", func() { batch.WithRecordKey[msg]("fake", nil) }, "fake: WithRecordKey: nil function"},
		{"nil payload function", func() { batch.WithPayloadValidation[msg, order]("fake", nil) }, "fake: WithPayloadValidation: nil function"},
		{"nil record payload function", func() { batch.WithRecordPayloadValidation[msg]("fake", nil) }, "fake: WithRecordPayloadValidation: nil function"},
		{"key function of another type", func() {
			wrap(newEngine(idempotent.NewMemoryStore()), handle,
				batch.WithKey[msg]("fake", func(o *order) (string, error) { return o.OrderID, nil }))
		}, "fake: Wrap: the function given to WithKey takes *batch_test.order, but the handler takes batch_test.order"},
		{"payload function of another type", func() {
			wrap(newEngine(idempotent.NewMemoryStore()), handle,
				batch.WithPayloadValidation[msg]("fake", func(m msg) (any, error) { return m.Body, nil }))
		}, "fake: Wrap: the function given to WithPayloadValidation takes batch_test.msg, but the handler takes batch_test.order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.PanicsWithValue(t, tt.want, tt.wrap)
		})
	}
	// A typed option overridden by a record option is not checked: it is
	// not used.
	assert.NotPanics(t, func() {
		wrap(newEngine(idempotent.NewMemoryStore()), handle,
			batch.WithKey[msg]("fake", func(m msg) (string, error) { return m.ID, nil }),
			batch.WithRecordKey("fake", func(m msg) (string, error) { return m.ID, nil }))
	})
}

// A key function's error is reported to the outcome hook as the core's
// rejection (ErrInvalidKey), with the record in the hook's context.
func TestKeyErrorReachesTheHook(t *testing.T) {
	t.Parallel()
	errNoKey := errors.New("no key")
	var mu sync.Mutex
	var got []idempotent.Event
	var ids []string
	e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(func(ctx context.Context, ev idempotent.Event) {
		m, _ := recordFrom(ctx)
		mu.Lock()
		defer mu.Unlock()
		got, ids = append(got, ev), append(ids, m.ID)
	}))
	h := wrap(e, newRecorder().handle, batch.WithKey[msg]("fake", func(order) (string, error) { return "", errNoKey }))
	assert.Equal(t, []string{"m1"}, h(context.Background(), []msg{one("m1", body("a", 1))}))
	require.Len(t, got, 1)
	assert.Equal(t, []string{"m1"}, ids)
	assert.Equal(t, idempotent.OutcomeRejected, got[0].Outcome)
	assert.ErrorIs(t, got[0].Err, idempotent.ErrInvalidKey)
	assert.ErrorIs(t, got[0].Err, errNoKey)
	assert.False(t, got[0].HandlerRan)
}

// Under IDEMKIT_DISABLED every handler runs, as under idempotent.Wrap:
// a key or payload function is not asked, and its error fails nothing. Not
// parallel: it sets the environment.
func TestDisabledRunsEveryHandler(t *testing.T) {
	t.Setenv("IDEMKIT_DISABLED", "1")
	r := newRecorder()
	h := wrap(newEngine(idempotent.NewMemoryStore()), r.handle,
		batch.WithKey[msg]("fake", func(o order) (string, error) {
			if o.OrderID == "nokey" {
				return "", errors.New("no key")
			}
			return o.OrderID, nil
		}),
		batch.WithPayloadValidation[msg]("fake", func(order) (any, error) { return nil, errors.New("no payload") }))
	failed := h(context.Background(), []msg{one("m1", body("nokey", 1)), one("m2", body("a", 1)), one("m3", body("a", 1)), one("m4", body("fail", 1))})
	assert.Equal(t, []string{"m4"}, failed)
	assert.Equal(t, []string{"nokey", "a", "a", "fail"}, r.Calls())
}

// TestInBatchDuplicates: records of one batch with the same key run the
// handler once, one after another, so the later ones are replays.
func TestInBatchDuplicates(t *testing.T) {
	t.Parallel()
	for _, parallelism := range []int{1, 4} {
		for _, lanes := range []string{"by key", "groups"} {
			t.Run(fmt.Sprintf("%s/parallelism=%d", lanes, parallelism), func(t *testing.T) {
				t.Parallel()
				mk := one
				if lanes == "groups" {
					// Duplicates in different lanes: they are only kept
					// apart by the key lock.
					mk = func(id, body string) msg { return grouped(id, "g-"+id, body) }
				}
				r := newRecorder()
				h := wrap(newEngine(idempotent.NewMemoryStore()), r.handle,
					batch.WithKey[msg]("fake", byOrderID), batch.WithParallelism[msg](parallelism))
				var msgs []msg
				for i, id := range []string{"a", "b", "a", "c", "a", "b", "a"} {
					msgs = append(msgs, mk(fmt.Sprintf("m%d", i), body(id, 1)))
				}
				msgs = append(msgs, mk("m9", body("a", 5))) // same key, another payload

				assert.Equal(t, []string{"m9"}, h(context.Background(), msgs))
				assert.ElementsMatch(t, []string{"a", "b", "c"}, r.Calls())
				r.requireNoOverlap(t)
			})
		}
	}
}

// TestStopAndContinue: by default an ordered lane stops at its first record
// not done, whatever made it so (a failure, a poison record, a panic, a key
// in progress elsewhere), and the rest of the lane is not run; a failed
// completion or a replay does not stop it. WithContinueOnFailure goes on.
func TestStopAndContinue(t *testing.T) {
	t.Parallel()
	completeFails := func(s *fakeStore) {
		s.complete = func(context.Context, storage.Record) error { return errThrottled }
	}
	inProgress := func(id string) func(s *fakeStore) {
		return func(s *fakeStore) { s.claim = onlyFor(id, refuseWith(func(*storage.Record) {}), s.mem) }
	}
	tests := []struct {
		name      string
		msgs      []msg
		fake      func(*fakeStore)
		cont      bool
		wantFail  []string
		wantCalls []string
	}{
		{
			name:     "a lane stops at its first failure",
			msgs:     []msg{grouped("1", "g", body("a", 1)), grouped("2", "g", body("fail", 1)), grouped("3", "g", body("b", 1))},
			wantFail: []string{"2", "3"}, wantCalls: []string{"a", "fail"},
		},
		{
			name: "other lanes go on",
			msgs: []msg{
				grouped("a1", "g1", body("a1", 1)), grouped("b1", "g2", body("b1", 1)),
				grouped("a2", "g1", body("a2-fail", 1)), grouped("b2", "g2", body("b2", 1)),
				grouped("a3", "g1", body("a3", 1)),
			},
			wantFail: []string{"a2", "a3"}, wantCalls: []string{"a1", "a2-fail", "b1", "b2"},
		},
		{
			name:     "a poison record stops its lane",
			msgs:     []msg{grouped("1", "g", body("a", 1)), grouped("2", "g", "not json"), grouped("3", "g", body("b", 1))},
			wantFail: []string{"2", "3"}, wantCalls: []string{"a"},
		},
		{
			name:     "a key in progress elsewhere stops its lane",
			msgs:     []msg{grouped("1", "g", body("a", 1)), grouped("2", "g", body("b", 1)), grouped("3", "h", body("c", 1))},
			fake:     inProgress("1"),
			wantFail: []string{"1", "2"}, wantCalls: []string{"c"},
		},
		{
			name:     "a panic stops its lane",
			msgs:     []msg{grouped("1", "g", body("panic", 1)), grouped("2", "g", body("b", 1))},
			wantFail: []string{"1", "2"}, wantCalls: []string{"panic"},
		},
		{
			name:      "a failed completion does not stop the lane",
			msgs:      []msg{grouped("1", "g", body("a", 1)), grouped("2", "g", body("b", 1))},
			fake:      completeFails,
			wantCalls: []string{"a", "b"},
		},
		{
			name:      "a replay does not stop the lane",
			msgs:      []msg{grouped("1", "g", body("a", 1)), grouped("1", "g", body("a", 1)), grouped("2", "g", body("b", 1))},
			wantCalls: []string{"a", "b"},
		},
		{
			name:     "WithContinueOnFailure goes on past a failure",
			msgs:     []msg{grouped("1", "g", body("a", 1)), grouped("2", "g", body("fail", 1)), grouped("3", "g", "not json"), grouped("4", "g", body("b", 1))},
			cont:     true,
			wantFail: []string{"2", "3"}, wantCalls: []string{"a", "fail", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &fakeStore{mem: idempotent.NewMemoryStore()}
			if tt.fake != nil {
				tt.fake(store)
			}
			var opts []option
			if tt.cont {
				opts = append(opts, batch.WithContinueOnFailure[msg]())
			}
			r := newRecorder()
			failed := wrap(newEngine(store), r.handle, opts...)(context.Background(), tt.msgs)
			assert.Equal(t, nonNil(tt.wantFail), failed, "failures, in batch order")
			assert.Equal(t, tt.wantCalls, r.Calls())
		})
	}
}

// TestParallelLanesInOrder: lanes run side by side, each in order, and a
// failure stops only its own lane.
func TestParallelLanesInOrder(t *testing.T) {
	t.Parallel()
	var msgs []msg
	var wantFail []string
	for i := 1; i <= 5; i++ {
		for g := 1; g <= 4; g++ {
			id := fmt.Sprintf("g%d-%d", g, i)
			orderID := id
			if g == 2 && i == 3 {
				orderID += "-fail"
			}
			if g == 2 && i >= 3 {
				wantFail = append(wantFail, id)
			}
			msgs = append(msgs, grouped(id, fmt.Sprintf("g%d", g), body(orderID, 1)))
		}
	}
	r := newRecorder()
	h := wrap(newEngine(idempotent.NewMemoryStore()), r.handle, batch.WithParallelism[msg](4))
	assert.Equal(t, wantFail, h(context.Background(), msgs))
	for g := 1; g <= 4; g++ {
		var want, got []string
		for i := 1; i <= 5; i++ {
			if g == 2 && i > 3 {
				break
			}
			id := fmt.Sprintf("g%d-%d", g, i)
			if g == 2 && i == 3 {
				id += "-fail"
			}
			want = append(want, id)
		}
		for _, c := range r.Calls() {
			if strings.HasPrefix(c, fmt.Sprintf("g%d-", g)) {
				got = append(got, c)
			}
		}
		assert.Equal(t, want, got, "lane g%d in order", g)
	}
}

// TestParallelism holds the first handlers until n of them run at once: the
// batch completes only if n lanes really run side by side, and never more.
func TestParallelism(t *testing.T) {
	t.Parallel()
	const n = 3
	for _, lanes := range []string{"by key", "groups"} {
		t.Run(lanes, func(t *testing.T) {
			t.Parallel()
			var active, maxActive atomic.Int32
			arrived := make(chan struct{}, 16)
			release := make(chan struct{})
			handle := func(ctx context.Context, _ order) error {
				cur := active.Add(1)
				defer active.Add(-1)
				for {
					m := maxActive.Load()
					if cur <= m || maxActive.CompareAndSwap(m, cur) {
						break
					}
				}
				arrived <- struct{}{}
				<-release
				return nil
			}
			reached := make(chan bool, 1)
			go func() {
				timeout := time.After(10 * time.Second)
				for range n {
					select {
					case <-arrived:
					case <-timeout:
						reached <- false
						close(release)
						return
					}
				}
				reached <- true
				close(release)
			}()
			var msgs []msg
			for i := range 8 {
				id := fmt.Sprintf("m%d", i)
				if lanes == "groups" {
					msgs = append(msgs, grouped(id, fmt.Sprintf("g%d", i%4), body(id, 1)))
				} else {
					msgs = append(msgs, one(id, body(id, 1)))
				}
			}
			h := wrap(newEngine(idempotent.NewMemoryStore()), handle, batch.WithParallelism[msg](n))
			assert.Empty(t, h(context.Background(), msgs))
			assert.True(t, <-reached, "%d handlers never ran at once", n)
			assert.Equal(t, int32(n), maxActive.Load())
		})
	}
}

// TestTimeUp: records not started when the invocation's time is up are
// reported without being processed.
func TestTimeUp(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		mk   func(id, body string) msg
	}{
		{"cancelled/by key", cancelled, one},
		{"cancelled/groups", cancelled, func(id, body string) msg { return grouped(id, "g", body) }},
		{"deadline passed/by key", expired, one},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRecorder()
			h := wrap(newEngine(idempotent.NewMemoryStore()), r.handle, batch.WithParallelism[msg](2))
			failed := h(tt.ctx, []msg{tt.mk("1", body("a", 1)), tt.mk("2", body("b", 1)), tt.mk("3", "not json")})
			assert.ElementsMatch(t, []string{"1", "2", "3"}, failed)
			assert.Empty(t, r.Calls())
		})
	}
}

func TestTimeUpDuringBatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRecorder()
	handle := func(ctx context.Context, o order) error {
		cancel() // the invocation's time runs out while this record finishes
		return r.handle(ctx, o)
	}
	h := wrap(newEngine(idempotent.NewMemoryStore()), handle)
	assert.Equal(t, []string{"2", "3"}, h(ctx, []msg{one("1", body("a", 1)), one("2", body("b", 1)), one("3", body("c", 1))}))
	assert.Equal(t, []string{"a"}, r.Calls())
}

// TestResponseReserve: processing stops short of the invocation's deadline,
// leaving time to return the response.
func TestResponseReserve(t *testing.T) {
	t.Parallel()
	deadline := time.Now().Add(2 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var seen time.Time
	store := &fakeStore{mem: idempotent.NewMemoryStore()}
	store.claim = func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
		seen, _ = ctx.Deadline()
		return store.mem.Claim(ctx, rec, now)
	}
	h := wrap(newEngine(store), newRecorder().handle)
	assert.Empty(t, h(ctx, []msg{one("1", body("a", 1))}))
	reserve := deadline.Sub(seen)
	assert.Greater(t, reserve, 100*time.Millisecond)
	assert.LessOrEqual(t, reserve, 500*time.Millisecond)
}

// TestSameKeyNeverOverlaps gives a duplicate every chance to run while its
// original is still running: the original's handler waits a while for a
// claim by any other record. Keeping them apart (one lane per key, a key
// lock across lanes) means no such claim comes, and the duplicate is then
// replayed; letting them overlap would make it fail with ErrInProgress.
func TestSameKeyNeverOverlaps(t *testing.T) {
	t.Parallel()
	for _, lanes := range []string{"by key", "groups"} {
		t.Run(lanes, func(t *testing.T) {
			t.Parallel()
			claims := make(chan string, 16)
			store := &fakeStore{mem: idempotent.NewMemoryStore()}
			store.claim = func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
				m, _ := recordFrom(ctx)
				claims <- m.ID
				return store.mem.Claim(ctx, rec, now)
			}
			r := newRecorder()
			handle := func(ctx context.Context, o order) error {
				self, _ := recordFrom(ctx)
				timeout := time.After(100 * time.Millisecond)
			wait:
				for {
					select {
					case id := <-claims:
						if id != self.ID {
							break wait
						}
					case <-timeout:
						break wait
					}
				}
				return r.handle(ctx, o)
			}
			m1, m2 := one("m1", body("a", 1)), one("m2", body("a", 1))
			if lanes == "groups" {
				m1, m2 = grouped("m1", "g1", body("a", 1)), grouped("m2", "g2", body("a", 1))
			}
			h := wrap(newEngine(store), handle, batch.WithKey[msg]("fake", byOrderID), batch.WithParallelism[msg](2))
			assert.Empty(t, h(context.Background(), []msg{m1, m2}))
			assert.Equal(t, []string{"a"}, r.Calls())
		})
	}
}

// An outcome hook that panics, even when told of a record rejected before
// the core (an undecodable body), fails that record only: not its
// neighbours, not the batch, and not the process when lanes run in parallel.
func TestOutcomeHookPanicFailsOnlyItsRecord(t *testing.T) {
	for _, parallelism := range []int{1, 4} {
		t.Run(fmt.Sprintf("parallelism %d", parallelism), func(t *testing.T) {
			r := newRecorder()
			e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
				if ev.Outcome == idempotent.OutcomeRejected {
					panic("hook bug")
				}
			}))
			h := wrap(e, r.handle, batch.WithKey[msg]("fake", byOrderID), batch.WithParallelism[msg](parallelism))
			var failed []string
			require.NotPanics(t, func() {
				failed = h(context.Background(), []msg{one("m1", body("o1", 5)), one("m2", "not json"), one("m3", body("o3", 1))})
			})
			assert.Equal(t, []string{"m2"}, failed)
			assert.ElementsMatch(t, []string{"o1", "o3"}, r.Calls())
		})
	}
}

// A handler that panics with an error: the outcome hook can match it.
func TestHandlerPanicWithAnErrorIsMatchable(t *testing.T) {
	sentinel := errors.New("sentinel")
	var got error
	e := newEngine(idempotent.NewMemoryStore(), idempotent.WithOutcomeHook(func(_ context.Context, ev idempotent.Event) {
		if ev.Outcome == idempotent.OutcomeHandlerError {
			got = ev.Err
		}
	}))
	h := wrap(e, func(context.Context, order) error { panic(sentinel) }, batch.WithKey[msg]("fake", byOrderID))
	assert.Equal(t, []string{"m1"}, h(context.Background(), []msg{one("m1", body("o1", 5))}))
	require.Error(t, got)
	assert.ErrorIs(t, got, sentinel)
}

// A duplicate in the batch of a record whose handler succeeded but whose
// completion failed finds the entry still in progress (under this
// invocation's own lease). It is done, not failed: its redelivery would take
// the entry over after the lease and run the handler a second time.
func TestDuplicateAfterFailedCompletion(t *testing.T) {
	for _, groups := range []bool{false, true} {
		t.Run(fmt.Sprintf("groups %v", groups), func(t *testing.T) {
			r := newRecorder()
			mem := idempotent.NewMemoryStore()
			// o1's first completion fails (by its record id: completions
			// of a batch go out concurrently, in no fixed order).
			var mu sync.Mutex
			failed := false
			o1 := idempotent.RecordID(testPrefix, "", "o1")
			store := &fakeStore{mem: mem, complete: func(ctx context.Context, rec storage.Record) error {
				mu.Lock()
				first := rec.ID == o1 && !failed
				failed = failed || first
				mu.Unlock()
				if first {
					return errThrottled
				}
				return mem.Complete(ctx, rec)
			}}
			h := wrap(newEngine(store), r.handle, batch.WithKey[msg]("fake", byOrderID))
			// m4 reuses o1's key with another payload: still refused.
			msgs := []msg{one("m1", body("o1", 5)), one("m2", body("o1", 5)), one("m3", body("o3", 1)), one("m4", body("o1", 6))}
			if groups {
				msgs = []msg{grouped("m1", "g1", body("o1", 5)), grouped("m2", "g2", body("o1", 5)),
					grouped("m3", "g1", body("o3", 1)), grouped("m4", "g3", body("o1", 6))}
			}
			assert.Equal(t, []string{"m4"}, h(context.Background(), msgs))
			assert.Equal(t, []string{"o1", "o3"}, r.Calls(), "o1 ran once")
		})
	}
}

// A record that only replayed its key does not make a later in-batch
// duplicate "done" when that one finds the key in progress: the handler did
// not run in this batch, so the duplicate fails and is redelivered.
func TestReplayDoesNotMarkKeyDone(t *testing.T) {
	r := newRecorder()
	mem := idempotent.NewMemoryStore()
	store := &fakeStore{mem: mem, claim: func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
		if m, _ := recordFrom(ctx); m.ID == "m2" {
			// Another invocation holds the key now (the entry expired and
			// was claimed again in between).
			return refuseWith(func(*storage.Record) {})(ctx, rec, now)
		}
		return mem.Claim(ctx, rec, now)
	}}
	h := wrap(newEngine(store), r.handle, batch.WithKey[msg]("fake", byOrderID))
	h(context.Background(), []msg{one("m0", body("o1", 5))}) // completes o1

	assert.Equal(t, []string{"m2"}, h(context.Background(), []msg{one("m1", body("o1", 5)), one("m2", body("o1", 5))}),
		"m1 replayed; m2 found o1 in progress elsewhere")
	assert.Equal(t, []string{"o1"}, r.Calls())
}

// runtime.Goexit in a handler ends its lane's goroutine (with parallel
// lanes, one of ours): the record and the rest of its lane are reported,
// to be redelivered, never silently dropped; other lanes finish.
func TestGoexitInHandlerLosesNoRecord(t *testing.T) {
	h := wrap(newEngine(idempotent.NewMemoryStore()), func(_ context.Context, o order) error {
		if o.OrderID == "exit" {
			runtime.Goexit()
		}
		return nil
	}, batch.WithKey[msg]("fake", byOrderID), batch.WithParallelism[msg](3))
	failed := h(context.Background(), []msg{grouped("m1", "g1", body("exit", 1)), grouped("m2", "g1", body("after", 1)), grouped("m3", "g2", body("ok", 1))})
	assert.Equal(t, []string{"m1", "m2"}, failed)
}

// A handler error is a failure whatever it wraps, even ErrResponseNotStored
// (from a nested idempotent call, say): the record is redelivered, not
// dropped as if its key were done.
func TestHandlerErrorWrappingResponseNotStoredFails(t *testing.T) {
	runs := 0
	h := wrap(newEngine(idempotent.NewMemoryStore()), func(context.Context, order) error {
		runs++
		return fmt.Errorf("charge: %w", idempotent.ErrResponseNotStored)
	}, batch.WithKey[msg]("fake", byOrderID))
	for range 2 {
		assert.Equal(t, []string{"m1"}, h(context.Background(), []msg{one("m1", body("o1", 5))}))
	}
	assert.Equal(t, 2, runs, "released: the redelivery runs it again")
}
