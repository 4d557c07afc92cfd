package idempotent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// maxStepNameBytes is the longest step name Step accepts.
const maxStepNameBytes = storage.MaxStepNameBytes

var (
	// ErrInvalidStep: Step was called with an empty or overlong name, one
	// that is not valid UTF-8 or holds a NUL byte (text not every store can
	// hold; see package storage), with a name already used in this run of
	// the handler, after the handler returned, or with a store that does not
	// record steps (not a storage.StepStore). Nothing ran: the step's
	// function did not, on any store. A programmer error: fix the handler.
	// Not retryable.
	ErrInvalidStep = errors.New("idempotent: invalid step")

	// ErrStepNotRecorded: the step ran (its side effect happened) but its
	// result could not be recorded: the store failed, the record would grow
	// past the store's item limit, or another invocation took the record
	// over. Step returns the step's result with it. A handler that goes on
	// and completes loses nothing; one that fails makes the retry run this
	// step again.
	ErrStepNotRecorded = errors.New("idempotent: step ran but was not recorded")
)

// Step runs fn once per record: the first time, it runs fn and, when fn
// succeeds, records its result in the handler's idempotency record (one
// store write, fenced by the lease); a later run of the same record — a
// takeover after a crash or an overrun lease, or a retry after the handler
// failed — gets the recorded result back without running fn. So a handler
// that charges a card, then writes a ledger entry, then sends an email
// charges once even when the ledger write fails and the retry runs again.
//
// Steps are matched by name: a step the record holds is answered from it,
// wherever the handler takes it; a step the record does not hold (never run,
// or run but not recorded) runs. So steps may be reordered or added between
// deployments, and a step whose record write failed simply runs again on the
// retry; a renamed step is a new step and runs again. Names are unique within
// a handler run, 1 to 128 bytes of UTF-8 without NUL; any other is refused
// with ErrInvalidStep without running fn, as on every store. Steps may be
// taken from several goroutines at once and may nest (a step inside
// another's fn); each is recorded when it finishes. A Step called after the
// handler returned is refused with ErrInvalidStep without running fn.
// Results are encoded with encoding/json and must round-trip through it.
// Inside fn,
// DownstreamKey(ctx) is the step's own key (derived from the record's and
// the step name): pass it to the step's downstream API, so that even a crash
// inside the step, after its side effect and before its record, repeats
// nothing where the API honours keys.
//
// Steps are kept while the record is INPROGRESS, bound to its payload
// fingerprint, and dropped when it completes or expires. Outside a handler
// run by a front door of this package, or with idempotency disabled
// (IDEMKIT_DISABLED), Step just calls fn. See docs/steps.md.
func Step[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	inv, ok := ctx.Value(invocationKey{}).(*invocationCtx)
	if !ok {
		return fn(ctx)
	}
	log := &inv.steps
	recorded, found, err := log.begin(name)
	if err != nil {
		return zero, err
	}
	if found {
		if log.e.tracing() {
			log.e.progress(ctx, Progress{Stage: StageStep, Step: name, Replayed: true})
		}
		var v T
		if err := json.Unmarshal(recorded, &v); err != nil {
			return zero, fmt.Errorf("%w: step %q: decode its recorded result: %w", ErrCorruptRecord, name, err)
		}
		return v, nil
	}
	v, err := fn(&stepCtx{Context: ctx, key: stepKey(inv.recordID, name)})
	if err != nil {
		return zero, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return v, fmt.Errorf("%w: step %q: encode its result: %w", ErrStepNotRecorded, name, err)
	}
	if err := log.record(ctx, storage.Step{Name: name, Data: data}); err != nil {
		return v, err
	}
	return v, nil
}

// stepLog is a run's view of its record's steps. It lives in the
// invocationCtx, so a run that takes no step costs nothing for it.
type stepLog struct {
	e         *Engine
	id, lease string

	mu       sync.Mutex
	resumed  []storage.Step // what the claim handed over, matched by name
	used     map[string]bool
	recorded int  // steps this run recorded
	ended    bool // the handler returned: no step may begin
}

// begin checks name and answers a step the record already holds.
func (l *stepLog) begin(name string) (data []byte, found bool, err error) {
	if name == "" || len(name) > maxStepNameBytes || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return nil, false, fmt.Errorf("%w: name %q: want 1 to %d bytes of UTF-8 without NUL", ErrInvalidStep, name, maxStepNameBytes)
	}
	if l.e.steps == nil {
		return nil, false, fmt.Errorf("%w: step %q: the store does not record steps (it is not a storage.StepStore)", ErrInvalidStep, name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return nil, false, fmt.Errorf("%w: step %q taken after the handler returned", ErrInvalidStep, name)
	}
	if l.used[name] {
		return nil, false, fmt.Errorf("%w: step %q taken twice in one run: step names must be unique", ErrInvalidStep, name)
	}
	if l.used == nil {
		l.used = make(map[string]bool)
	}
	l.used[name] = true
	for _, held := range l.resumed {
		if held.Name == name {
			return held.Data, true, nil
		}
	}
	return nil, false, nil
}

// end refuses every later step and returns the names of held steps this run
// did not take (renamed or dropped by a deployment).
func (l *stepLog) end() (untaken []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	for _, held := range l.resumed {
		if !l.used[held.Name] {
			untaken = append(untaken, held.Name)
		}
	}
	return untaken
}

// record writes a finished step into the record.
func (l *stepLog) record(ctx context.Context, step storage.Step) error {
	fctx, cancel := finishContext(ctx)
	defer cancel()
	err := l.e.steps.AppendStep(fctx, l.id, l.lease, step)
	if l.e.tracing() {
		l.e.progress(ctx, Progress{Stage: StageStep, Step: step.Name, Err: err})
	}
	if err != nil {
		return fmt.Errorf("%w: step %q: %w", ErrStepNotRecorded, step.Name, err)
	}
	l.mu.Lock()
	l.recorded++
	l.mu.Unlock()
	return nil
}

// holds reports whether the record holds steps, so that a failed run must
// keep it (Suspend) rather than delete it (Release).
func (l *stepLog) holds() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.resumed) > 0 || l.recorded > 0
}

// stepCtx is a step's context: DownstreamKey answers the step's own key.
type stepCtx struct {
	context.Context
	key string
}

type stepKeyKey struct{}

func (c *stepCtx) Value(key any) any {
	if key == (stepKeyKey{}) {
		return c.key
	}
	return c.Context.Value(key)
}

// stepKey derives a step's downstream key from its record and name, as
// downstreamKey does for the record.
func stepKey(recordID, name string) string {
	sum := sha256.Sum256([]byte("idemkit/step/v1\x00" + recordID + "\x00" + name))
	return hex.EncodeToString(sum[:16])
}
