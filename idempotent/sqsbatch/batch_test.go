package sqsbatch_test

import (
	"context"
	"testing"

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
