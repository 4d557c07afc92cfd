package sqsbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/internal/frontdoor"
)

// maxResponseReserve is the most time kept back from processing, before the
// invocation's deadline, to return the batch response: an invocation that
// times out fails its whole batch, successes included.
const maxResponseReserve = 500 * time.Millisecond

// handleBatch processes one SQS event. It never returns an error: a failed
// message is reported in the response, and an error would fail (and redeliver)
// every message of the batch, the processed ones included.
func (b *batcher[T]) handleBatch(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	if len(ev.Records) == 0 {
		return resp, nil
	}
	ctx, cancel := reserveResponseTime(ctx)
	defer cancel()

	items := make([]item[T], len(ev.Records))
	for i := range ev.Records {
		b.prepare(ctx, &items[i], &ev.Records[i])
	}
	p := makePlan(items)
	// Every message counts as failed until it is processed: a lane cut short
	// (runtime.Goexit in a handler, say) then loses none of its messages.
	failed := make([]bool, len(items))
	for i := range failed {
		failed[i] = true
	}
	b.runLanes(ctx, p, items, failed)

	reported := make(map[string]bool)
	for i, f := range failed {
		id := ev.Records[i].MessageId
		if f && !reported[id] {
			reported[id] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
	}
	return resp, nil
}

// reserveResponseTime shortens ctx's deadline, if it has one, by a tenth of
// the time left, at most maxResponseReserve.
func reserveResponseTime(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := max(min(maxResponseReserve, time.Until(deadline)/10), 0)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// prepare decodes a message and derives its key. A panic in a decoder, a
// Validate method or a key function fails this message only.
func (b *batcher[T]) prepare(ctx context.Context, it *item[T], m *events.SQSMessage) {
	it.msg = m
	defer func() {
		if r := recover(); r != nil {
			it.err = fmt.Errorf("%w while decoding or keying the message: %v", errPanicked, r)
			b.log().LogAttrs(ctx, slog.LevelError, "sqsbatch: panic while decoding or keying a message",
				slog.String("message_id", m.MessageId), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	v, err := b.decode(m)
	if err != nil {
		it.err = err
		return
	}
	it.val = v
	it.key, it.keyErr = b.key(m, v)
}

// plan is the order in which a batch is processed. A lane is a list of
// messages (indexes into the batch, in batch order) processed one after
// another; lanes may run side by side. On a standard queue a lane holds the
// messages of one key, so a duplicate in the batch runs after its original
// has finished and is answered from its record. On a FIFO queue a lane is a
// message group, and a key that occurs in several groups gets a lock so its
// messages still never run at the same time.
type plan struct {
	lanes [][]int
	fifo  bool
	locks map[string]*sync.Mutex // read-only once made
	done  *keySet                // keys whose handler ran and succeeded in this batch
}

// keySet is a set of keys shared by the lanes of one batch.
type keySet struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (s *keySet) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = make(map[string]bool)
	}
	s.keys[key] = true
}

func (s *keySet) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key]
}

func isFIFO(m *events.SQSMessage) bool {
	return strings.HasSuffix(m.EventSourceARN, ".fifo") || m.Attributes["MessageGroupId"] != ""
}

func makePlan[T any](items []item[T]) plan {
	p := plan{done: &keySet{}}
	for i := range items {
		if isFIFO(items[i].msg) {
			p.fifo = true
			break
		}
	}
	laneOf := make(map[string]int)
	for i := range items {
		it := &items[i]
		var name string
		switch {
		case p.fifo:
			name = it.msg.Attributes["MessageGroupId"]
		case it.hasKey():
			name = it.key
		default: // a message without a usable key is on its own
			p.lanes = append(p.lanes, []int{i})
			continue
		}
		if l, ok := laneOf[name]; ok {
			p.lanes[l] = append(p.lanes[l], i)
			continue
		}
		laneOf[name] = len(p.lanes)
		p.lanes = append(p.lanes, []int{i})
	}
	if !p.fifo {
		return p
	}
	firstLane := make(map[string]int)
	for l, lane := range p.lanes {
		for _, i := range lane {
			it := &items[i]
			if !it.hasKey() {
				continue
			}
			if first, ok := firstLane[it.key]; !ok {
				firstLane[it.key] = l
			} else if first != l && p.locks[it.key] == nil {
				if p.locks == nil {
					p.locks = make(map[string]*sync.Mutex)
				}
				p.locks[it.key] = new(sync.Mutex)
			}
		}
	}
	return p
}

// runLanes processes every lane, up to b.parallelism lanes at once. Each lane
// writes only its own entries of failed.
func (b *batcher[T]) runLanes(ctx context.Context, p plan, items []item[T], failed []bool) {
	n := min(b.parallelism, len(p.lanes))
	if n <= 1 {
		for _, lane := range p.lanes {
			b.runLane(ctx, p, lane, items, failed)
		}
		return
	}
	// Every lane is queued before the workers start, so a worker that exits
	// early (runtime.Goexit) cannot block the queueing; its unprocessed
	// messages stay failed.
	next := make(chan []int, len(p.lanes))
	for _, lane := range p.lanes {
		next <- lane
	}
	close(next)
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			for lane := range next {
				b.runLane(ctx, p, lane, items, failed)
			}
		}()
	}
	wg.Wait()
}

// runLane processes a lane's messages in order. On a FIFO queue the first
// failure fails the rest of its message group unprocessed, so that a retry
// sees the group's messages in their original order.
// Each lane writes only its own entries of failed, all true on entry, and
// clears those of the messages that may be deleted.
func (b *batcher[T]) runLane(ctx context.Context, p plan, lane []int, items []item[T], failed []bool) {
	for pos, i := range lane {
		if b.process(ctx, p, &items[i]) {
			failed[i] = false
			continue
		}
		if !p.fifo {
			continue
		}
		for _, j := range lane[pos+1:] {
			b.log().LogAttrs(ctx, slog.LevelInfo, "sqsbatch: skipped after an earlier failure in its message group",
				slog.String("message_id", items[j].msg.MessageId))
		}
		return
	}
}

// process runs one message through the engine and reports whether it may be
// deleted from the queue.
func (b *batcher[T]) process(ctx context.Context, p plan, it *item[T]) (ok bool) {
	attrs := it.attrs()
	id := attrs[0]
	defer func() {
		// The handler's own panics are errors by now (see run); this catches
		// those of a payload function or an outcome hook (also when it is told
		// of a rejected message), so that they fail this message rather than
		// the batch or the process (the Lambda runtime cannot recover a panic
		// in a goroutine of ours).
		if r := recover(); r != nil {
			b.log().LogAttrs(ctx, slog.LevelError, "sqsbatch: panic while processing a message",
				id, slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			ok = false
		}
	}()
	if it.err != nil {
		if !errors.Is(it.err, errPanicked) { // a panic was logged with its stack
			b.log().LogAttrs(ctx, slog.LevelWarn, "sqsbatch: message cannot be processed", id, slog.String("error", it.err.Error()))
		}
		// Never seen by the core: reported to it, so that its outcome hooks
		// and log see the rejection, with the message in the context.
		_ = b.engine.Reject(context.WithValue(ctx, messageKey{}, it.msg), frontdoor.Call{Attrs: attrs},
			fmt.Errorf("%w: %w", idempotent.ErrInvalidPayload, it.err))
		return false
	}
	if mu := p.locks[it.key]; mu != nil && it.hasKey() {
		mu.Lock()
		defer mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		b.log().LogAttrs(ctx, slog.LevelWarn, "sqsbatch: not processed: the invocation's time is up", id, slog.String("error", err.Error()))
		return false
	}
	ran, err := b.do(context.WithValue(ctx, messageKey{}, it.msg), it, attrs)
	switch {
	case ran && err != nil:
		// The handler failed, whatever its error wraps (a nested idempotent
		// call's ErrResponseNotStored, say): the engine released the key, and
		// the message must be redelivered.
		return false
	case ran:
		// The handler succeeded; the message is done even if its record could
		// not be completed (reporting it would run the handler again for sure).
		if it.hasKey() {
			p.done.add(it.key)
		}
		return true
	case err == nil || errors.Is(err, idempotent.ErrResponseNotStored):
		// A replay. ErrResponseNotStored: the handler already ran for this
		// key; an SQS message needs no response, so it is done.
		return true
	case errors.Is(err, idempotent.ErrInProgress) && it.hasKey() && p.done.has(it.key):
		// The engine found the key in progress, and its handler ran and
		// succeeded earlier in this batch: that message's completion failed
		// (or its record was taken over since). The key's work is done here;
		// failing this message would have its redelivery take the record over
		// after the lease and run the handler again.
		b.log().LogAttrs(ctx, slog.LevelInfo, "sqsbatch: duplicate of a message that succeeded in this batch", id)
		return true
	}
	return false
}
