package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// Unit tests: no server needed.

// fakeScripter answers EVALSHA and EVAL with canned replies. Its function
// fields are nil unless a test sets them; a nil one fails the test.
type fakeScripter struct {
	t       *testing.T
	evalSha func(sha string, keys []string, args []any) (any, error)
	eval    func(src string, keys []string, args []any) (any, error)
	calls   []string
}

var _ redis.Scripter = (*fakeScripter)(nil)

func reply(ctx context.Context, v any, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(v)
	}
	return cmd
}

func (f *fakeScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	f.calls = append(f.calls, "evalsha")
	if f.evalSha == nil {
		f.t.Fatalf("unexpected EVALSHA %v", keys)
	}
	v, err := f.evalSha(sha, keys, args)
	return reply(ctx, v, err)
}

func (f *fakeScripter) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	f.calls = append(f.calls, "eval")
	if f.eval == nil {
		f.t.Fatalf("unexpected EVAL %v", keys)
	}
	v, err := f.eval(src, keys, args)
	return reply(ctx, v, err)
}

func (f *fakeScripter) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	f.t.Fatal("unexpected EVAL_RO")
	return nil
}

func (f *fakeScripter) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	f.t.Fatal("unexpected EVALSHA_RO")
	return nil
}

func (f *fakeScripter) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	f.t.Fatal("unexpected SCRIPT EXISTS")
	return nil
}

func (f *fakeScripter) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	f.t.Fatal("unexpected SCRIPT LOAD")
	return nil
}

// answer returns a fake whose EVALSHA always replies v.
func answer(t *testing.T, v any) *fakeScripter {
	return &fakeScripter{t: t, evalSha: func(string, []string, []any) (any, error) { return v, nil }}
}

func TestNew(t *testing.T) {
	t.Parallel()
	assert.PanicsWithValue(t, "redisstore: New: nil client", func() { redisstore.New(nil) })

	got := redisstore.New(answer(t, nil)).Options()
	assert.Equal(t, redisstore.Options{KeyPrefix: "idemkit:", MaxItemBytes: 400 << 10, ScanCount: 100}, got)

	got = redisstore.New(answer(t, nil), func(o *redisstore.Options) {
		o.KeyPrefix = "svc:"
		o.MaxItemBytes = -1
		o.ScanCount = -1
	}).Options()
	assert.Equal(t, redisstore.Options{KeyPrefix: "svc:", MaxItemBytes: storage.DefaultMaxItemBytes, ScanCount: 100}, got)
}

func TestDecodeHash(t *testing.T) {
	t.Parallel()
	full := []any{
		"status", "COMPLETED", "expiration", "1700000000", "in_progress_expiration", "1700000000123",
		"lease", "l1", "validation", "fp", "data", "p\x00\xff", "version", "1", "extra", "ignored",
	}
	rec, err := redisstore.DecodeHash("fn#id", full)
	require.NoError(t, err)
	assert.Equal(t, storage.Record{
		ID:             "fn#id",
		Status:         storage.StatusCompleted,
		ExpiresAt:      time.Unix(1700000000, 0),
		LeaseExpiresAt: time.UnixMilli(1700000000123),
		Lease:          "l1",
		Fingerprint:    "fp",
		Data:           []byte("p\x00\xff"),
		Version:        1,
	}, rec)

	withSteps, err := redisstore.DecodeHash("fn#id", append(full[:len(full):len(full)], "steps", "6:charge,2:\x00,,3:a:b,0:,"))
	require.NoError(t, err)
	assert.Equal(t, []storage.Step{{Name: "charge", Data: []byte("\x00,")}, {Name: "a:b"}}, withSteps.Steps)

	suspended, err := redisstore.DecodeHash("fn#id", append(full[:len(full):len(full)], "suspended", "1"))
	require.NoError(t, err)
	assert.True(t, suspended.Suspended)
	assert.False(t, rec.Suspended, "no suspended field (every record written before it existed): not suspended")

	minimal, err := redisstore.DecodeHash("fn#id", []any{"status", "INPROGRESS", "expiration", "-5", "lease", ""})
	require.NoError(t, err)
	assert.Equal(t, storage.Record{ID: "fn#id", Status: storage.StatusInProgress, ExpiresAt: time.Unix(-5, 0)}, minimal,
		"optional fields absent: zero values (Version 0 is refused by the wrapper as foreign)")

	base := func(kv ...any) []any {
		fields := map[string]any{"status": "COMPLETED", "expiration": "1700000000", "lease": "l1", "version": "1"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(fields, kv[i].(string))
			} else {
				fields[kv[i].(string)] = kv[i+1]
			}
		}
		var flat []any
		for k, v := range fields {
			flat = append(flat, k, v)
		}
		return flat
	}
	for _, tc := range []struct {
		name string
		flat []any
		want string // in the error message
	}{
		{"OddList", []any{"status"}, "field/value pairs"},
		{"NonStringName", []any{int64(1), "x"}, "field name is a int64"},
		{"NonStringValue", base("status", int64(3)), `field "status" is a int64`},
		{"ArrayValue", base("lease", []any{}), `field "lease" is a []interface {}`},
		{"MissingStatus", base("status", nil), `"status" is missing`},
		{"MissingExpiration", base("expiration", nil), `"expiration" is missing`},
		{"MissingLease", base("lease", nil), `"lease" is missing`},
		{"EmptyExpiration", base("expiration", ""), `"expiration" is ""`},
		{"SignOnlyExpiration", base("expiration", "-"), `"expiration" is "-"`},
		{"PlusExpiration", base("expiration", "+1"), `"expiration" is "+1"`},
		{"SpaceExpiration", base("expiration", " 1"), `"expiration" is " 1"`},
		{"FloatExpiration", base("expiration", "1.5"), `"expiration" is "1.5"`},
		{"OverflowExpiration", base("expiration", "9223372036854775808"), "out of range"},
		{"HexLeaseEnd", base("in_progress_expiration", "0x10"), `"in_progress_expiration" is "0x10"`},
		{"TextVersion", base("version", "v1"), `"version" is "v1"`},
		{"MalformedSteps", base("steps", "6:charge,"), `field "steps" is malformed: step 1 ("charge") data`},
		{"NonStringSteps", base("steps", int64(1)), `field "steps" is a int64`},
		{"SuspendedTrue", base("suspended", "true"), `field "suspended" is "true", want "1"`},
		{"SuspendedZero", base("suspended", "0"), `field "suspended" is "0", want "1"`},
		{"SuspendedEmpty", base("suspended", ""), `field "suspended" is "", want "1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				rec storage.Record
				err error
			)
			require.NotPanics(t, func() { rec, err = redisstore.DecodeHash("fn#id", tc.flat) })
			require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, storage.Record{}, rec)
		})
	}
}

// TestStepsEncoding pins the steps field's encoding (netstring name, then
// netstring data, per step) and that the decoder refuses anything else.
func TestStepsEncoding(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `6:charge,8:{"id":1},`, redisstore.EncodeStep(storage.Step{Name: "charge", Data: []byte(`{"id":1}`)}))
	assert.Equal(t, "0:,0:,", redisstore.EncodeStep(storage.Step{}))

	steps := []storage.Step{
		{Name: "charge", Data: []byte("\x00\xff,:\"\\")},
		{Name: "", Data: []byte("x")},
		{Name: "10:a,", Data: nil},
		{Name: "big", Data: bytes.Repeat([]byte{'9'}, 12345)},
	}
	var enc string
	for _, st := range steps {
		enc += redisstore.EncodeStep(st)
	}
	got, err := redisstore.DecodeSteps(enc)
	require.NoError(t, err)
	assert.Equal(t, steps, got)

	got, err = redisstore.DecodeSteps("")
	require.NoError(t, err)
	assert.Nil(t, got)

	// A retried append (its first answer lost) repeats the last step: read once.
	charge := redisstore.EncodeStep(storage.Step{Name: "charge", Data: []byte(`{"id":1}`)})
	email := redisstore.EncodeStep(storage.Step{Name: "email", Data: []byte(`true`)})
	got, err = redisstore.DecodeSteps(charge + charge + email + email)
	require.NoError(t, err)
	assert.Equal(t, []storage.Step{{Name: "charge", Data: []byte(`{"id":1}`)}, {Name: "email", Data: []byte(`true`)}}, got)

	for _, tc := range []struct{ v, want string }{
		{"x", "step 1 name: at byte 0: want a decimal length"},
		{"1", "step 1 name: at byte 0: want a decimal length"},
		{"1:a", "length 1 runs past the end"},
		{"1:a;", `at byte 3: want "," after 1 bytes`},
		{"-1:a,", "at byte 0: want a decimal length"},
		{"+1:a,0:,", "at byte 0: want a decimal length"},
		{" 1:a,0:,", "at byte 0: want a decimal length"},
		{"1:a,", "step 1 (\"a\") data: at byte 4"},
		{"1:a,0:,1:b,", "step 2 (\"b\") data: at byte 11"},
		{"99999999999999999999:a,0:,", "runs past the end"},
		{"2:a,0:,", `at byte 4: want "," after 2 bytes`},
	} {
		got, err := redisstore.DecodeSteps(tc.v)
		assert.Nil(t, got, "%q", tc.v)
		if assert.Error(t, err, "%q", tc.v) {
			assert.Contains(t, err.Error(), tc.want, "%q", tc.v)
		}
	}
}

// FuzzDecodeSteps: the decoder never panics, and what it accepts encodes
// back to the same value, except lengths written with leading zeros (the
// encoder never writes them; they are read as the number they spell).
func FuzzDecodeSteps(f *testing.F) {
	f.Add("6:charge,2:ok,")
	f.Add("0:,0:,")
	f.Add("1:a,")
	f.Add("01:a,1:b,")
	f.Fuzz(func(t *testing.T, v string) {
		steps, err := redisstore.DecodeSteps(v)
		if err != nil {
			return
		}
		var enc string
		for _, st := range steps {
			enc += redisstore.EncodeStep(st)
		}
		again, err := redisstore.DecodeSteps(enc)
		require.NoError(t, err)
		assert.Equal(t, steps, again)
		if !strings.Contains(v, "0") {
			assert.Equal(t, v, enc)
		}
	})
}

func TestKeyExpiryMs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		expires time.Time
		want    int64
	}{
		{"WholeSecond", time.Unix(1700000000, 0), 1700000001000},
		{"FractionIgnored", time.Unix(1700000000, 999_999_999), 1700000001000},
		{"Epoch", time.Unix(0, 0), 1000},
		{"BeforeEpoch", time.Unix(-10, 0), 0},
		{"ZeroTime", time.Time{}, 0},
		{"FarFuture", time.Unix(math.MaxInt64/1000, 0), 1 << 53},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, redisstore.KeyExpiryMs(tc.expires))
		})
	}
}

func TestCompletedSize(t *testing.T) {
	t.Parallel()
	rec := storage.Record{
		ID: "fn#id", Status: storage.StatusCompleted, ExpiresAt: time.Unix(1700000000, 0),
		Lease: "lease", Fingerprint: "fp", Data: []byte("data!"), Version: 1,
	}
	want := len("idemkit:fn#id") + len("status") + len("COMPLETED") + len("expiration") + len("1700000000") +
		len("lease") + len("lease") + len("validation") + len("fp") + len("data") + len("data!") + len("version") + len("1")
	assert.Equal(t, want, redisstore.CompletedSize("idemkit:fn#id", &rec))
	rec.Fingerprint, rec.Data = "", nil
	want -= len("validation") + len("fp") + len("data") + len("data!")
	assert.Equal(t, want, redisstore.CompletedSize("idemkit:fn#id", &rec))
}

func TestTooLargeMakesNoCall(t *testing.T) {
	t.Parallel()
	fake := &fakeScripter{t: t}
	store := redisstore.New(fake, func(o *redisstore.Options) { o.MaxItemBytes = 1000 })
	rec := storage.Record{ID: "fn#id", Status: storage.StatusCompleted, ExpiresAt: time.Now().Add(time.Hour),
		Lease: "l", Data: bytes.Repeat([]byte{'x'}, 1000), Version: 1}
	err := store.Complete(context.Background(), rec)
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Contains(t, err.Error(), "limit 1000")

	// A step that alone, with the key, would not fit any record.
	room := 1000 - len(store.Key(rec.ID)) - len("steps") - len("4:huge,") - len(":,")
	err = store.AppendStep(context.Background(), rec.ID, rec.Lease, storage.Step{Name: "huge", Data: bytes.Repeat([]byte{'x'}, room)})
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Contains(t, err.Error(), `append step "huge"`)
	assert.Empty(t, fake.calls)
}

// TestScriptArguments pins what each operation sends: the record's key as the
// only KEYS entry, and the arguments the scripts expect.
func TestScriptArguments(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1700000000123)
	rec := storage.Record{
		ID: "fn#id", Status: storage.StatusInProgress, ExpiresAt: time.Unix(1700003600, 0),
		LeaseExpiresAt: time.UnixMilli(1700000090123), Lease: "l1", Fingerprint: "fp", Version: 1,
	}
	var gotKeys []string
	var gotArgs []any
	fake := &fakeScripter{t: t, evalSha: func(_ string, keys []string, args []any) (any, error) {
		gotKeys, gotArgs = keys, args
		return []any{"claimed", int64(0), ""}, nil
	}}
	store := redisstore.New(fake, func(o *redisstore.Options) { o.KeyPrefix, o.MaxItemBytes = "p:", 5000 })

	_, err := store.Claim(context.Background(), rec, now)
	require.NoError(t, err)
	assert.Equal(t, []string{"p:fn#id"}, gotKeys)
	assert.Equal(t, []any{"l1", "1700000000", "1700000000123", "1700003601000", "fp",
		"status", "INPROGRESS", "expiration", "1700003600", "in_progress_expiration", "1700000090123",
		"lease", "l1", "validation", "fp", "version", "1"}, gotArgs)

	fake.evalSha = func(_ string, keys []string, args []any) (any, error) {
		gotKeys, gotArgs = keys, args
		return []any{"ok"}, nil
	}
	done := rec
	done.Status, done.LeaseExpiresAt, done.Data = storage.StatusCompleted, time.Time{}, []byte("resp")
	require.NoError(t, store.Complete(context.Background(), done))
	assert.Equal(t, []string{"p:fn#id"}, gotKeys)
	assert.Equal(t, []any{"l1", "1700003601000", "COMPLETED", "1700003600", []byte("resp"), ""}, gotArgs)

	require.NoError(t, store.Release(context.Background(), "fn#id", "l1"))
	assert.Equal(t, []string{"p:fn#id"}, gotKeys)
	assert.Equal(t, []any{"l1"}, gotArgs)

	require.NoError(t, store.AppendStep(context.Background(), "fn#id", "l1", storage.Step{Name: "charge", Data: []byte("c,1:")}))
	assert.Equal(t, []string{"p:fn#id"}, gotKeys)
	assert.Equal(t, []any{"l1", "6:charge,4:c,1:,", "5000"}, gotArgs)

	require.NoError(t, store.Suspend(context.Background(), "fn#id", "l1", time.UnixMilli(1700000000999)))
	assert.Equal(t, []string{"p:fn#id"}, gotKeys)
	assert.Equal(t, []any{"l1", "1700000000999"}, gotArgs)
}

// TestUnexpectedReplies: a reply the store does not understand (another
// script under the same SHA, a proxy that mangles replies) is an error,
// never a panic and never a claim.
func TestUnexpectedReplies(t *testing.T) {
	t.Parallel()
	now := time.Now()
	rec := storage.Record{ID: "fn#id", Status: storage.StatusInProgress, ExpiresAt: now.Add(time.Hour), Lease: "l", Version: 1}
	for _, tc := range []struct {
		name  string
		reply any
	}{
		{"Nil", nil},
		{"String", "OK"},
		{"Int", int64(1)},
		{"Empty", []any{}},
		{"UnknownTag", []any{"maybe"}},
		{"NonStringTag", []any{int64(1), int64(0)}},
		{"ClaimedWithoutFlag", []any{"claimed"}},
		{"ClaimedWithStringFlag", []any{"claimed", "1", ""}},
		{"ClaimedWithoutSteps", []any{"claimed", int64(0)}},
		{"ClaimedWithIntSteps", []any{"claimed", int64(0), int64(1)}},
		{"ClaimedWithUnknownReplaced", []any{"claimed", int64(3), ""}},
		{"ClaimedWithNegativeReplaced", []any{"claimed", int64(-1), ""}},
		{"OwnWithoutSteps", []any{"own"}},
		{"TooLargeWithoutSize", []any{"toolarge"}},
		{"RefusedWithoutRecord", []any{"refused"}},
		{"RefusedWithString", []any{"refused", "status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := redisstore.New(answer(t, tc.reply))
			var (
				res storage.ClaimResult
				err error
			)
			require.NotPanics(t, func() { res, err = store.Claim(context.Background(), rec, now) })
			require.Error(t, err)
			assert.False(t, res.Claimed)
			require.NotPanics(t, func() { err = store.Complete(context.Background(), rec) })
			require.Error(t, err)
			require.NotPanics(t, func() { err = store.Release(context.Background(), rec.ID, rec.Lease) })
			require.Error(t, err)
			require.NotPanics(t, func() { err = store.AppendStep(context.Background(), rec.ID, rec.Lease, storage.Step{Name: "s"}) })
			require.Error(t, err)
			if tc.name != "TooLargeWithoutSize" { // not a reply of the suspend script
				require.NotPanics(t, func() { err = store.Suspend(context.Background(), rec.ID, rec.Lease, now) })
				require.Error(t, err)
			}
		})
	}
}

func TestReplies(t *testing.T) {
	t.Parallel()
	now := time.Now()
	rec := storage.Record{ID: "fn#id", Status: storage.StatusInProgress, ExpiresAt: now.Add(time.Hour), Lease: "l", Version: 1}
	ctx := context.Background()

	res, err := redisstore.New(answer(t, []any{"claimed", int64(1), ""})).Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, TookOver: true}, res)

	res, err = redisstore.New(answer(t, []any{"claimed", int64(2), ""})).Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, Resumed: true}, res, "a suspended record replaced: a resume, not a takeover")

	res, err = redisstore.New(answer(t, []any{"claimed", int64(0), ""})).Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true}, res)

	res, err = redisstore.New(answer(t, []any{"own", ""})).Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true}, res)

	kept := []storage.Step{{Name: "a", Data: []byte("1")}, {Name: "b"}}
	res, err = redisstore.New(answer(t, []any{"claimed", int64(1), "1:a,1:1,1:b,0:,"})).Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, TookOver: true, Steps: kept}, res)
	res, err = redisstore.New(answer(t, []any{"own", "1:a,1:1,1:b,0:,"})).Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, storage.ClaimResult{Claimed: true, Steps: kept}, res)

	for _, bad := range [][]any{{"claimed", int64(0), "1:a,"}, {"own", "x"}, {"badsteps", "9:a,"}, {"badsteps", ""}} {
		res, err = redisstore.New(answer(t, bad)).Claim(ctx, rec, now)
		require.ErrorIs(t, err, idempotent.ErrCorruptRecord, "%v", bad)
		assert.Contains(t, err.Error(), `"steps"`)
		assert.Equal(t, storage.ClaimResult{}, res)
	}

	_, err = redisstore.New(answer(t, []any{"past", int64(1700000000000)})).Claim(ctx, rec, now)
	require.ErrorIs(t, err, redisstore.ErrExpiryInPast)
	assert.Contains(t, err.Error(), "2023-11-14T22:13:20Z")

	err = redisstore.New(answer(t, []any{"gone"})).Complete(ctx, rec)
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	err = redisstore.New(answer(t, []any{"lost"})).Complete(ctx, rec)
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	err = redisstore.New(answer(t, []any{"past", int64(1)})).Complete(ctx, rec)
	require.ErrorIs(t, err, redisstore.ErrExpiryInPast)

	require.NoError(t, redisstore.New(answer(t, []any{"gone"})).Release(ctx, rec.ID, rec.Lease))
	err = redisstore.New(answer(t, []any{"lost", ""})).Release(ctx, rec.ID, rec.Lease)
	require.ErrorIs(t, err, storage.ErrLeaseLost)

	step := storage.Step{Name: "charge", Data: []byte("c")}
	require.NoError(t, redisstore.New(answer(t, []any{"ok"})).AppendStep(ctx, rec.ID, rec.Lease, step))
	for _, tc := range []struct {
		reply []any
		want  string
	}{
		{[]any{"gone"}, "the record is gone"},
		{[]any{"lost", ""}, "the record has another lease"},
		{[]any{"lost", "COMPLETED"}, "the record is COMPLETED under another lease"},
		{[]any{"done", "COMPLETED"}, `no longer in progress: status "COMPLETED"`},
	} {
		err = redisstore.New(answer(t, tc.reply)).AppendStep(ctx, rec.ID, rec.Lease, step)
		require.ErrorIs(t, err, storage.ErrLeaseLost)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), `append step "charge"`)
		if tc.reply[0] == "gone" {
			continue // a suspended record that is gone is not an error
		}
		err = redisstore.New(answer(t, tc.reply)).Suspend(ctx, rec.ID, rec.Lease, now)
		if tc.reply[0] == "done" {
			// The caller's completed record: its completion landed.
			require.ErrorIs(t, err, storage.ErrAlreadyCompleted)
			require.NotErrorIs(t, err, storage.ErrLeaseLost)
			err = redisstore.New(answer(t, tc.reply)).Release(ctx, rec.ID, rec.Lease)
			require.ErrorIs(t, err, storage.ErrAlreadyCompleted, "release")
			continue
		}
		require.ErrorIs(t, err, storage.ErrLeaseLost)
		assert.Contains(t, err.Error(), tc.want)
	}
	err = redisstore.New(answer(t, []any{"done", "INPROGRESS?"})).Release(ctx, rec.ID, rec.Lease)
	require.ErrorIs(t, err, storage.ErrLeaseLost, "the caller's record in a state that is neither")
	err = redisstore.New(answer(t, []any{"toolarge", int64(409601)})).AppendStep(ctx, rec.ID, rec.Lease, step)
	require.ErrorIs(t, err, storage.ErrTooLarge)
	assert.Contains(t, err.Error(), "409601 bytes (limit 409600)")
	err = redisstore.New(answer(t, []any{"wrongtype", "string"})).AppendStep(ctx, rec.ID, rec.Lease, step)
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)

	require.NoError(t, redisstore.New(answer(t, []any{"ok"})).Suspend(ctx, rec.ID, rec.Lease, now))
	require.NoError(t, redisstore.New(answer(t, []any{"gone"})).Suspend(ctx, rec.ID, rec.Lease, now))
	err = redisstore.New(answer(t, []any{"wrongtype", "list"})).Suspend(ctx, rec.ID, rec.Lease, now)
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	require.ErrorIs(t, err, idempotent.ErrCorruptRecord)
}

// serverError is an error reply from the server, as go-redis types them.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

var _ redis.Error = serverError("")

// TestFirstCallLoadsScript: a server without the script answers EVALSHA with
// NOSCRIPT, and the same call is sent again as EVAL with the source, so a
// cold call costs two round trips and every later one a single EVALSHA.
func TestFirstCallLoadsScript(t *testing.T) {
	t.Parallel()
	loaded := false
	var src string
	fake := &fakeScripter{t: t}
	fake.evalSha = func(string, []string, []any) (any, error) {
		if !loaded {
			return nil, serverError("NOSCRIPT No matching script. Please use EVAL.")
		}
		return []any{"ok"}, nil
	}
	fake.eval = func(s string, _ []string, _ []any) (any, error) {
		loaded, src = true, s
		return []any{"ok"}, nil
	}
	store := redisstore.New(fake)
	require.NoError(t, store.Release(context.Background(), "fn#id", "l"))
	assert.Equal(t, []string{"evalsha", "eval"}, fake.calls)
	assert.Contains(t, src, "redis.call('DEL', key)")
	fake.calls = nil
	require.NoError(t, store.Release(context.Background(), "fn#id", "l"))
	assert.Equal(t, []string{"evalsha"}, fake.calls)
}

func TestContextErrors(t *testing.T) {
	t.Parallel()
	fake := &fakeScripter{t: t}
	store := redisstore.New(fake)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Now()
	rec := storage.Record{ID: "fn#id", Status: storage.StatusCompleted, ExpiresAt: now.Add(time.Hour), Lease: "l", Version: 1}
	_, err := store.Claim(ctx, rec, now)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, store.Complete(ctx, rec), context.Canceled)
	require.ErrorIs(t, store.Release(ctx, rec.ID, rec.Lease), context.Canceled)
	require.ErrorIs(t, store.AppendStep(ctx, rec.ID, rec.Lease, storage.Step{Name: "s"}), context.Canceled)
	require.ErrorIs(t, store.Suspend(ctx, rec.ID, rec.Lease, now), context.Canceled)
	assert.Empty(t, fake.calls)

	err = redisstore.New(&fakeScripter{t: t, evalSha: func(string, []string, []any) (any, error) {
		return nil, errors.New("connection reset")
	}}).Release(context.Background(), "fn#id", "l")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "redisstore: release: connection reset"), err.Error())
}
