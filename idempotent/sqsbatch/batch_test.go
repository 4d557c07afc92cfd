package sqsbatch_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/idempotent/storage"
)

func TestFIFO(t *testing.T) {
	t.Parallel()
	completeFails := func(s *fakeStore) {
		s.complete = func(context.Context, storage.Record) error { return errThrottled }
	}
	inProgress := func(id string) func(s *fakeStore) {
		return func(s *fakeStore) { s.claim = onlyFor(id, refuseWith(func(*storage.Record) {}), s.mem) }
	}
	groupOnly := func(id, group, body string) events.SQSMessage {
		m := msg(id, body)
		m.Attributes = map[string]string{"MessageGroupId": group}
		return m
	}
	arnOnly := func(id, body string) events.SQSMessage {
		m := msg(id, body)
		m.EventSourceARN = fifoARN
		return m
	}
	tests := []struct {
		name      string
		msgs      []events.SQSMessage
		fake      func(*fakeStore)
		wantFail  []string
		wantCalls []string
	}{
		{
			name: "a group stops at its first failure",
			msgs: []events.SQSMessage{
				fifoMsg("1", "g", body("a", 1)), fifoMsg("2", "g", body("fail", 1)),
				fifoMsg("3", "g", body("b", 1)), fifoMsg("4", "g", body("c", 1)),
			},
			wantFail: []string{"2", "3", "4"}, wantCalls: []string{"a", "fail"},
		},
		{
			name: "other groups go on",
			msgs: []events.SQSMessage{
				fifoMsg("a1", "g1", body("a1", 1)), fifoMsg("b1", "g2", body("b1", 1)),
				fifoMsg("a2", "g1", body("a2-fail", 1)), fifoMsg("b2", "g2", body("b2", 1)),
				fifoMsg("a3", "g1", body("a3", 1)), fifoMsg("b3", "g2", body("b3", 1)),
			},
			wantFail: []string{"a2", "a3"}, wantCalls: []string{"a1", "a2-fail", "b1", "b2", "b3"},
		},
		{
			name: "a poison message stops its group",
			msgs: []events.SQSMessage{
				fifoMsg("1", "g", body("a", 1)), fifoMsg("2", "g", "not json"), fifoMsg("3", "g", body("b", 1)),
			},
			wantFail: []string{"2", "3"}, wantCalls: []string{"a"},
		},
		{
			name: "a key in progress elsewhere stops its group",
			msgs: []events.SQSMessage{
				fifoMsg("1", "g", body("a", 1)), fifoMsg("2", "g", body("b", 1)), fifoMsg("3", "h", body("c", 1)),
			},
			fake:     inProgress("1"),
			wantFail: []string{"1", "2"}, wantCalls: []string{"c"},
		},
		{
			name: "a panic stops its group",
			msgs: []events.SQSMessage{
				fifoMsg("1", "g", body("panic", 1)), fifoMsg("2", "g", body("b", 1)),
			},
			wantFail: []string{"1", "2"}, wantCalls: []string{"panic"},
		},
		{
			name: "a failed completion does not stop the group",
			msgs: []events.SQSMessage{
				fifoMsg("1", "g", body("a", 1)), fifoMsg("2", "g", body("b", 1)),
			},
			fake:      completeFails,
			wantCalls: []string{"a", "b"},
		},
		{
			name: "a replay does not stop the group",
			msgs: []events.SQSMessage{
				fifoMsg("1", "g", body("a", 1)), fifoMsg("1", "g", body("a", 1)), fifoMsg("2", "g", body("b", 1)),
			},
			wantCalls: []string{"a", "b"},
		},
		{
			name: "recognised by the MessageGroupId attribute",
			msgs: []events.SQSMessage{
				groupOnly("1", "g", body("fail", 1)), groupOnly("2", "g", body("b", 1)), groupOnly("3", "h", body("c", 1)),
			},
			wantFail: []string{"1", "2"}, wantCalls: []string{"fail", "c"},
		},
		{
			name: "recognised by the .fifo ARN",
			msgs: []events.SQSMessage{
				arnOnly("1", body("fail", 1)), arnOnly("2", body("b", 1)),
			},
			wantFail: []string{"1", "2"}, wantCalls: []string{"fail"},
		},
		{
			name: "a standard queue does not stop",
			msgs: []events.SQSMessage{
				msg("1", body("fail", 1)), msg("2", body("b", 1)),
			},
			wantFail: []string{"1"}, wantCalls: []string{"fail", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &fakeStore{mem: idempotent.NewMemoryStore()}
			if tt.fake != nil {
				tt.fake(store)
			}
			rec := newRecorder()
			h := sqsbatch.Wrap(newEngine(store), rec.handle)
			resp, err := h(context.Background(), batch(tt.msgs...))
			require.NoError(t, err)
			assert.Equal(t, nonNil(tt.wantFail), failedIDs(resp), "failures, in batch order")
			assert.Equal(t, tt.wantCalls, rec.Calls())
		})
	}
}

// TestFIFOParallel: groups run side by side, each in order, and a failure
// stops only its own group.
func TestFIFOParallel(t *testing.T) {
	t.Parallel()
	var msgs []events.SQSMessage
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
			msgs = append(msgs, fifoMsg(id, fmt.Sprintf("g%d", g), body(orderID, 1)))
		}
	}
	rec := newRecorder()
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), rec.handle, sqsbatch.WithParallelism[order](4))
	resp, err := h(context.Background(), batch(msgs...))
	require.NoError(t, err)
	assert.Equal(t, wantFail, failedIDs(resp))
	for g := 1; g <= 4; g++ {
		var want []string
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
		assert.Equal(t, want, rec.callsOf(fmt.Sprintf("g%d-", g)), "group g%d in order", g)
	}
}

// TestParallelism holds the first handlers until n of them run at once: the
// batch completes only if n lanes really run side by side, and never more.
func TestParallelism(t *testing.T) {
	t.Parallel()
	const n = 3
	for _, queue := range []string{"standard", "fifo"} {
		t.Run(queue, func(t *testing.T) {
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
			var msgs []events.SQSMessage
			for i := range 8 {
				id := fmt.Sprintf("m%d", i)
				if queue == "fifo" {
					msgs = append(msgs, fifoMsg(id, fmt.Sprintf("g%d", i%4), body(id, 1)))
				} else {
					msgs = append(msgs, msg(id, body(id, 1)))
				}
			}
			h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), handle, sqsbatch.WithParallelism[order](n))
			resp, err := h(context.Background(), batch(msgs...))
			require.NoError(t, err)
			assert.True(t, <-reached, "%d handlers never ran at once", n)
			assert.Empty(t, resp.BatchItemFailures)
			assert.Equal(t, int32(n), maxActive.Load())
		})
	}
}

// TestTimeUp: messages not started when the invocation's time is up are
// reported as failures without being processed, and the function still
// returns no error.
func TestTimeUp(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		mk   func(id, body string) events.SQSMessage
	}{
		{"cancelled/standard", cancelled, msg},
		{"cancelled/fifo", cancelled, func(id, body string) events.SQSMessage { return fifoMsg(id, "g", body) }},
		{"deadline passed/standard", expired, msg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), rec.handle, sqsbatch.WithParallelism[order](2))
			resp, err := h(tt.ctx, batch(tt.mk("1", body("a", 1)), tt.mk("2", body("b", 1)), tt.mk("3", "not json")))
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"1", "2", "3"}, failedIDs(resp))
			assert.Empty(t, rec.Calls())
		})
	}
}

func TestTimeUpDuringBatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	handle := func(ctx context.Context, o order) error {
		cancel() // the invocation's time runs out while this message finishes
		return rec.handle(ctx, o)
	}
	h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore()), handle)
	resp, err := h(ctx, batch(msg("1", body("a", 1)), msg("2", body("b", 1)), msg("3", body("c", 1))))
	require.NoError(t, err)
	assert.Equal(t, []string{"2", "3"}, failedIDs(resp))
	assert.Equal(t, []string{"a"}, rec.Calls())
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
	h := sqsbatch.Wrap(newEngine(store), newRecorder().handle)
	resp, err := h(ctx, batch(msg("1", body("a", 1))))
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	reserve := deadline.Sub(seen)
	assert.Greater(t, reserve, 100*time.Millisecond)
	assert.LessOrEqual(t, reserve, 500*time.Millisecond)
}

// TestSameKeyNeverOverlaps gives a duplicate every chance to run while its
// original is still running: the original's handler waits a while for a
// claim by any other message. Keeping them apart (one lane per key on a
// standard queue, a key lock across FIFO groups) means no such claim comes,
// and the duplicate is then replayed; letting them overlap would make the
// duplicate fail with ErrInProgress.
func TestSameKeyNeverOverlaps(t *testing.T) {
	t.Parallel()
	for _, queue := range []string{"standard", "fifo"} {
		t.Run(queue, func(t *testing.T) {
			t.Parallel()
			claims := make(chan string, 16)
			store := &fakeStore{mem: idempotent.NewMemoryStore()}
			store.claim = func(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
				m, _ := sqsbatch.MessageFromContext(ctx)
				claims <- m.MessageId
				return store.mem.Claim(ctx, rec, now)
			}
			rec := newRecorder()
			handle := func(ctx context.Context, o order) error {
				self, _ := sqsbatch.MessageFromContext(ctx)
				timeout := time.After(100 * time.Millisecond)
			wait:
				for {
					select {
					case id := <-claims:
						if id != self.MessageId {
							break wait
						}
					case <-timeout:
						break wait
					}
				}
				return rec.handle(ctx, o)
			}
			m1, m2 := msg("m1", body("a", 1)), msg("m2", body("a", 1))
			if queue == "fifo" {
				m1, m2 = fifoMsg("m1", "g1", body("a", 1)), fifoMsg("m2", "g2", body("a", 1))
			}
			h := sqsbatch.Wrap(newEngine(store), handle, sqsbatch.WithKey(byOrderID), sqsbatch.WithParallelism[order](2))
			resp, err := h(context.Background(), batch(m1, m2))
			require.NoError(t, err)
			assert.Empty(t, resp.BatchItemFailures)
			assert.Equal(t, []string{"a"}, rec.Calls())
		})
	}
}
