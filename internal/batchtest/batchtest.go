package batchtest

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// Store names a store the tests run on.
type Store struct {
	// Name names the store in subtest names.
	Name string
	// Make returns a new, empty store for t.
	Make func(t *testing.T) storage.Store
}

// Stores are the memory store and DynamoDB Local (skipped without an
// endpoint, failed under scripts/with-dynamodb.sh when there is none).
func Stores() []Store {
	return []Store{
		{"memory", func(*testing.T) storage.Store { return idempotent.NewMemoryStore() }},
		{"dynamodb-local", func(t *testing.T) storage.Store {
			client := localddbtest.Client(t)
			return dynamostore.New(client, localddbtest.Tables(t, client).Idempotency)
		}},
	}
}

// Engine is an Engine over store on clock c, with its logs discarded.
func Engine(store storage.Store, c *Clock, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{
		idempotent.WithLogger(slog.New(slog.DiscardHandler)), idempotent.WithClock(c.Now),
	}, opts...)...)
}

// Clock is a clock a test moves.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at the real time, to the second.
func NewClock() *Clock { return &Clock{now: time.Now().Truncate(time.Second)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// CrashStore is a store whose completions and releases are lost while
// Crashed says so for their context: as if the invocation died after running
// the handler, leaving its entry in progress until the lease ends.
type CrashStore struct {
	storage.Store
	// Crashed reports whether the invocation of ctx has crashed.
	Crashed func(ctx context.Context) bool
}

// Complete completes rec, unless the invocation crashed.
func (s *CrashStore) Complete(ctx context.Context, rec storage.Record) error {
	if s.Crashed(ctx) {
		return nil
	}
	return s.Store.Complete(ctx, rec)
}

// Release releases id, unless the invocation crashed.
func (s *CrashStore) Release(ctx context.Context, id, lease string) error {
	if s.Crashed(ctx) {
		return nil
	}
	return s.Store.Release(ctx, id, lease)
}

// Recorder is a handler's log of calls: the names it was called for, in
// order, and the names whose calls fail.
type Recorder struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]bool
}

// Call records name and returns an error when name is set to fail.
func (r *Recorder) Call(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
	if r.fail[name] {
		return errHandler
	}
	return nil
}

// Fail makes the calls for names fail (none when names is empty).
func (r *Recorder) Fail(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = map[string]bool{}
	for _, n := range names {
		r.fail[n] = true
	}
}

// Calls returns the names called for, in order, and forgets them.
func (r *Recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := slices.Clone(r.calls)
	r.calls = nil
	return c
}

type handlerError struct{}

func (handlerError) Error() string { return "the downstream service failed" }

var errHandler error = handlerError{}

// ReadEvent reads a sample event of the repository's events directory
// (path relative to the test's package directory) into T, refusing fields
// T does not know, so a sample cannot drift from the shape Lambda delivers.
func ReadEvent[T any](t *testing.T, path string) T {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var v T
	require.NoError(t, decodeStrict(data, &v), "%s", path)
	return v
}
