package idemkitcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// fakeRecords is a store of records held in a map, written by the test
// directly: the commands' own logic, without a server.
type fakeRecords struct {
	storage.Store // nil: the commands never claim, complete or release

	mu      sync.Mutex
	recs    map[string]storage.Record
	foreign map[string]bool // ids of records another tool wrote: read as corrupt
}

func newFake(recs ...storage.Record) *fakeRecords {
	f := &fakeRecords{recs: map[string]storage.Record{}, foreign: map[string]bool{}}
	for _, r := range recs {
		f.recs[r.ID] = r
	}
	return f
}

func (f *fakeRecords) corrupt(id string) error {
	return &storage.CorruptRecordError{ID: id, Fields: map[string]string{"status": `"INPROGRESS"`},
		Err: fmt.Errorf("%w: not this library's record", storage.ErrCorruptRecord)}
}

func (f *fakeRecords) Get(_ context.Context, id string) (storage.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.foreign[id] {
		return storage.Record{}, f.corrupt(id)
	}
	rec, ok := f.recs[id]
	if !ok {
		return storage.Record{}, fmt.Errorf("fake: %w", storage.ErrNotFound)
	}
	return rec, nil
}

func (f *fakeRecords) Delete(_ context.Context, rec storage.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if got, ok := f.recs[rec.ID]; !ok || got.Lease != rec.Lease || got.Status != rec.Status {
		return fmt.Errorf("fake: %w", storage.ErrChanged)
	}
	delete(f.recs, rec.ID)
	return nil
}

// Scan passes every record of opts.Status, whatever opts.IDPrefix: the tests
// check list's own filter (ofPrefix), which keeps idemkit's id shape alone.
func (f *fakeRecords) Scan(_ context.Context, opts storage.ScanOptions, fn func(storage.Record, error) bool) error {
	f.mu.Lock()
	ids := slices.Sorted(maps.Keys(f.recs))
	for id := range f.foreign {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	var p storage.ScanProgress
	defer func() {
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}()
	for _, id := range ids {
		p.Scanned++
		rec, err := f.Get(context.Background(), id)
		if err == nil && opts.Status != "" && rec.Status != opts.Status {
			continue
		}
		p.Matched++
		if !fn(rec, err) {
			return nil
		}
	}
	return nil
}

func (f *fakeRecords) name() string { return "fake store" }
func (f *fakeRecords) close() error { return nil }

func (f *fakeRecords) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.recs[id]
	return ok
}

type result struct {
	code           int
	stdout, stderr string
}

// runFake runs the command on store with the clock at now.
func runFake(t *testing.T, store records, now time.Time, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &Command{Stdout: &out, Stderr: &errOut, Now: func() time.Time { return now }, testStore: store}
	code := c.Run(t.Context(), args)
	return result{code, out.String(), errOut.String()}
}

// inProgress is an INPROGRESS record of prefix and key whose lease ends at
// leaseEnd, with the named finished steps.
func inProgress(prefix, key string, now, leaseEnd time.Time, steps ...string) storage.Record {
	rec := storage.Record{ID: idempotent.RecordID(prefix, "", key), Status: storage.StatusInProgress,
		ExpiresAt: now.Add(time.Hour), LeaseExpiresAt: leaseEnd, Lease: "lease-" + key, Fingerprint: "fp",
		Version: storage.RecordVersion}
	for _, s := range steps {
		rec.Steps = append(rec.Steps, storage.Step{Name: s, Data: []byte(`"ok"`)})
	}
	return rec
}

// TestInspectSuspended: a record its owner suspended after a handler error
// is described as such, with its steps; a lapsed lease without suspension
// stays "its owner crashed or overran".
func TestInspectSuspended(t *testing.T) {
	t.Parallel()
	now := time.Now()
	suspended := inProgress("payments", "suspended", now, now.Add(-time.Second), "charge", "reserve")
	suspended.Suspended = true
	crashed := inProgress("payments", "crashed", now, now.Add(-time.Second), "charge")
	store := newFake(suspended, crashed)

	tests := []struct {
		name      string
		rec       storage.Record
		want      []string
		notWant   string
		wantState string
	}{
		{"suspended", suspended, []string{"SUSPENDED after a handler error", "resumes it at once", "steps    2 finished",
			"1. charge", "2. reserve"}, "crashed or overran", "suspended"},
		{"lapsed", crashed, []string{"LAPSED", "its owner crashed or overran", "steps    1 finished"}, "SUSPENDED", "lapsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runFake(t, store, now, "inspect", "--id", tt.rec.ID)
			require.Equal(t, ExitOK, r.code, r.stderr)
			for _, w := range tt.want {
				assert.Contains(t, r.stdout, w)
			}
			assert.NotContains(t, r.stdout, tt.notWant)

			r = runFake(t, store, now, "inspect", "--id", tt.rec.ID, "--json")
			require.Equal(t, ExitOK, r.code, r.stderr)
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
			assert.Equal(t, tt.rec.Suspended, v["suspended"])
			assert.Equal(t, true, v["leaseLapsed"])

			r = runFake(t, store, now, "list", "--stuck")
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Regexp(t, `(?m)^`+tt.wantState+` +\S+ +\S+ +`+tt.rec.ID+`$`, r.stdout)
		})
	}
}

// TestForgetSteps: forget shows a record's finished steps and refuses to
// throw them away without --force.
func TestForgetSteps(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name     string
		rec      storage.Record
		args     []string
		wantCode int
		want     []string // in stdout + stderr
		deleted  bool
	}{
		{"lapsed with steps", inProgress("p", "k", now, now.Add(-time.Minute), "charge", "ship"), nil, ExitRefused,
			[]string{"1. charge", "2. ship", "holds 2 finished step(s) (charge, ship)", "pass --force"}, false},
		{"suspended with steps", func() storage.Record {
			r := inProgress("p", "k", now, now.Add(-time.Minute), "charge")
			r.Suspended = true
			return r
		}(), nil, ExitRefused, []string{"SUSPENDED", "holds 1 finished step(s) (charge)"}, false},
		{"dry run refused too", inProgress("p", "k", now, now.Add(-time.Minute), "charge"), []string{"--dry-run"}, ExitRefused,
			[]string{"holds 1 finished step(s)"}, false},
		{"forced", inProgress("p", "k", now, now.Add(-time.Minute), "charge"), []string{"--force"}, ExitOK,
			[]string{"WARNING: throwing away 1 finished step(s) (charge)", "forgotten"}, true},
		{"live with steps, forced", inProgress("p", "k", now, now.Add(time.Minute), "charge"), []string{"--force"}, ExitOK,
			[]string{"WARNING: forgetting a live INPROGRESS record", "WARNING: throwing away 1 finished step(s)"}, true},
		{"live with steps", inProgress("p", "k", now, now.Add(time.Minute), "charge"), nil, ExitRefused,
			[]string{"owner may still be running"}, false},
		{"lapsed without steps", inProgress("p", "k", now, now.Add(-time.Minute)), nil, ExitOK, []string{"forgotten"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newFake(tt.rec)
			r := runFake(t, store, now, append([]string{"forget", "--id", tt.rec.ID}, tt.args...)...)
			assert.Equal(t, tt.wantCode, r.code, r.stdout+r.stderr)
			for _, w := range tt.want {
				assert.Contains(t, r.stdout+r.stderr, w)
			}
			assert.Equal(t, !tt.deleted, store.has(tt.rec.ID), "still there")
		})
	}
}

// TestListPrefix: --prefix keeps one function's records; another tool's
// records on a shared table (Powertools': read as corrupt) are left out.
func TestListPrefix(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pay := inProgress("payments", "a", now, now.Add(-time.Second))
	pay2 := inProgress("payments", "b", now, now.Add(time.Minute))
	longer := inProgress("payments-v2", "a", now, now.Add(-time.Second)) // "payments" is its prefix's prefix
	orders := inProgress("orders", "a", now, now.Add(-time.Second))
	store := newFake(pay, pay2, longer, orders)
	store.foreign["payments.handler#c4ca4238a0b923820dcc509a6f75849b"] = true // Powertools Python: function.handler#md5 hex
	store.foreign["payments#4PhdCKDyGVs9hQPBULSSzA=="] = true                 // Powertools TypeScript: function#base64 md5
	corruptOwn := idempotent.RecordID("payments", "", "corrupt")              // idemkit's shape: listed, as corrupt
	store.foreign[corruptOwn] = true

	tests := []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"no filter", nil, []string{pay.ID, pay2.ID, longer.ID, orders.ID, "payments.handler#", "payments#4Phd", corruptOwn}, nil},
		{"payments", []string{"--prefix", "payments"}, []string{pay.ID, pay2.ID, "CORRUPT   -", corruptOwn},
			[]string{longer.ID, orders.ID, "payments.handler#", "payments#4Phd"}},
		{"orders, stuck", []string{"--prefix", "orders", "--stuck"}, []string{orders.ID}, []string{pay.ID, "CORRUPT"}},
		{"nothing", []string{"--prefix", "refunds"}, []string{"no records found"}, []string{"CORRUPT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"list"}, tt.args...)
			if !slices.Contains(args, "--stuck") {
				args = append(args, "--in-progress")
			}
			r := runFake(t, store, now, args...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			for _, w := range tt.want {
				assert.Contains(t, r.stdout, w)
			}
			for _, w := range tt.notWant {
				assert.NotContains(t, r.stdout, w)
			}
		})
	}

	r := runFake(t, store, now, "list", "--in-progress", "--prefix", "payments", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	require.Len(t, listed, 3)
	assert.Equal(t, pay.ID, listed[0]["id"], "lapsed first")
	assert.Equal(t, pay2.ID, listed[1]["id"])
	assert.Equal(t, corruptOwn, listed[2]["id"], "corrupt last")
	assert.Contains(t, r.stderr, "3 listed (4 of other prefixes or tools left out)")

	r = runFake(t, store, now, "list", "--in-progress", "--prefix", "payments#")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "without the #")
}
