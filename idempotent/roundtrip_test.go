package idempotent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// The rule these tests hold is stated at idempotent.WithCodec: a replay
// equals the first response, or the problem is reported where it belongs.

// TestEncodingJSONBehaviour pins the encoding/json facts the checks rely
// on, so a Go release that changes one fails here first.
func TestEncodingJSONBehaviour(t *testing.T) {
	t.Parallel()
	marshal := func(v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	// Invalid UTF-8 is written as the escape \ufffd, a valid U+FFFD as it is.
	assert.Equal(t, `"a\ufffdb"`, marshal("a\xffb"))
	assert.Equal(t, `{"\ufffd":1}`, marshal(map[string]int{"\xfe": 1}))
	assert.Equal(t, "\"a\uFFFDb\"", marshal("a\uFFFDb"))
	assert.Equal(t, `"a\\ufffdb"`, marshal(`a\ufffdb`), "a literal backslash is escaped")
	// A `json:",string"` string is escaped twice: the escape of an invalid
	// byte is then preceded by a backslash.
	assert.Equal(t, `{"S":"\"a\\ufffdb\""}`, marshal(struct {
		S string `json:",string"`
	}{"a\xffb"}))
	var back string
	require.NoError(t, json.Unmarshal([]byte(marshal("a\xffb")), &back))
	assert.Equal(t, "a\uFFFDb", back, "the invalid byte comes back as U+FFFD")

	// An empty interface gets float64 and map[string]any; other interfaces
	// cannot be decoded into (null can).
	var a any
	require.NoError(t, json.Unmarshal([]byte(marshal(int64(1)<<53+1)), &a))
	assert.Equal(t, float64(1<<53), a)
	var s struct{ S fmt.Stringer }
	require.NoError(t, json.Unmarshal([]byte(`{"S":null}`), &s))
	require.Error(t, json.Unmarshal([]byte(`{"S":{}}`), &s))
	// An int64 field keeps every bit.
	var n struct{ N int64 }
	require.NoError(t, json.Unmarshal([]byte(`{"N":9007199254740993}`), &n))
	assert.Equal(t, int64(9007199254740993), n.N)

	// chan, func, complex and maps with float keys fail even when nil or empty.
	for _, v := range []any{struct{ C chan int }{}, struct{ F func() }{}, struct{ C complex128 }{}, map[float64]int{}} {
		_, err := json.Marshal(v)
		require.Error(t, err, "%T", v)
	}
	// json.RawMessage is compacted (and HTML-escaped).
	assert.Equal(t, `{"a":"\u003cb\u003e"}`, marshal(json.RawMessage(`{ "a" : "<b>" }`)))
}

type stringer string

func (s stringer) String() string { return string(s) }

type withStringer struct {
	ID   string       `json:"id"`
	Meta fmt.Stringer `json:"meta"`
}

type itemWithError struct {
	Name string
	Err  error
}

type withItems struct {
	Items []itemWithError
}

type hidden struct {
	Err error
}

type embedsUnexported struct {
	hidden
	ID string
}

type embedsUnexportedPointer struct {
	*hidden
	ID string
}

type treeWithStringer struct {
	Kids []treeWithStringer
	Leaf *leafWithStringer
}

type leafWithStringer struct {
	V fmt.Stringer
}

// marshalsOnly encodes itself but decodes field by field, so its fields are
// checked.
type marshalsOnly struct {
	S fmt.Stringer
}

func (m marshalsOnly) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }

// wrapOf wraps a handler returning Out's zero value: Wrap's checks of Out.
func wrapOf[Out any](opts ...idempotent.Option) func() {
	return func() {
		idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), append([]idempotent.Option{quiet}, opts...)...), func(context.Context, order) (Out, error) {
			var zero Out
			return zero, nil
		}, idempotent.WithKey(orderKey))
	}
}

func TestWrapRefusesTypesJSONCannotReplay(t *testing.T) {
	t.Parallel()
	const (
		fixInterface   = "return a concrete type there, implement json.Unmarshaler on a type that holds it, or pass WithCodec a codec that round-trips it"
		fixUnencodable = "leave it out of the response (a struct field can be tagged `json:\"-\"`)"
	)
	for _, tt := range []struct {
		name string
		wrap func()
		want []string
	}{
		{"Out an interface", wrapOf[fmt.Stringer](),
			[]string{"idempotent: Wrap: response type fmt.Stringer is an interface", "return a concrete type, or pass WithCodec a codec that round-trips it"}},
		{"Out any", wrapOf[any](), []string{"response type interface {} is an interface", "map[string]any"}},
		{"Out error", wrapOf[error](), []string{"response type error is an interface"}},
		{"Out any with WithCodec(json.Marshal, json.Unmarshal)", wrapOf[any](idempotent.WithCodec(json.Marshal, json.Unmarshal)), []string{"response type interface {} is an interface"}},
		{"interface field", wrapOf[withStringer](),
			[]string{"response type idempotent_test.withStringer cannot be replayed equal with encoding/json: response.Meta is of interface type fmt.Stringer, which encoding/json cannot decode into", fixInterface}},
		{"interface field of a slice element", wrapOf[withItems](), []string{"response.Items[i].Err is of interface type error", fixInterface}},
		{"interface field behind a pointer", wrapOf[*withItems](), []string{"response type *idempotent_test.withItems", "response.Items[i].Err is of interface type error"}},
		{"interface in an embedded unexported struct", wrapOf[embedsUnexported](), []string{"response.hidden.Err is of interface type error"}},
		{"interface array element", wrapOf[[2]fmt.Stringer](), []string{"response[i] is of interface type fmt.Stringer"}},
		{"interface map value", wrapOf[map[string]error](), []string{"response[k] is of interface type error"}},
		{"interface in a recursive type", wrapOf[treeWithStringer](), []string{"response.Leaf.V is of interface type fmt.Stringer"}},
		{"type that marshals itself but decodes by fields", wrapOf[marshalsOnly](), []string{"response.S is of interface type fmt.Stringer"}},
		{"chan field", wrapOf[struct{ C chan int }](), []string{"response.C is of type chan int, which encoding/json cannot encode", fixUnencodable}},
		{"func field", wrapOf[struct{ F func() }](), []string{"response.F is of type func(), which encoding/json cannot encode"}},
		{"complex field", wrapOf[struct{ Z []complex128 }](), []string{"response.Z[i] is of type complex128, which encoding/json cannot encode"}},
		{"unsafe.Pointer", wrapOf[struct{ P unsafe.Pointer }](), []string{"response.P is of type unsafe.Pointer"}},
		{"chan Out", wrapOf[chan int](), []string{"response is of type chan int"}},
		{"float map key", wrapOf[struct{ M map[float64]string }](), []string{"the keys of response.M are of type float64, which encoding/json cannot use as map keys"}},
		{"interface map key", wrapOf[map[fmt.Stringer]int](), []string{"the keys of response are of type fmt.Stringer"}},
		{"struct map key", wrapOf[map[struct{ A int }]int](), []string{"the keys of response are of type struct { A int }"}},
		{"embedded pointer to an unexported struct", wrapOf[embedsUnexportedPointer](),
			[]string{"response embeds a pointer to the unexported type idempotent_test.hidden, which encoding/json cannot allocate"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var msg string
			func() {
				defer func() { msg = fmt.Sprint(recover()) }()
				tt.wrap()
			}()
			for _, w := range tt.want {
				assert.Contains(t, msg, w)
			}
		})
	}
}

// replaysEqual runs a handler returning v, then a duplicate, and requires
// both to return v with no error, the handler having run once.
func replaysEqual[Out any](v Out, opts ...idempotent.Option) func(t *testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int32
		var h func(context.Context, order) (Out, error)
		require.NotPanics(t, func() {
			h = idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), append([]idempotent.Option{quiet}, opts...)...), func(context.Context, order) (Out, error) {
				runs.Add(1)
				return v, nil
			}, idempotent.WithKey(orderKey))
		})
		first, err := h(context.Background(), order{ID: "o"})
		require.NoError(t, err)
		require.Equal(t, v, first)
		again, err := h(context.Background(), order{ID: "o"})
		require.NoError(t, err)
		require.Equal(t, v, again, "the replay equals the first response")
		require.EqualValues(t, 1, runs.Load())
	}
}

type concrete struct {
	ID     string            `json:"id"`
	Amount int64             `json:"amount"`
	Ratio  float64           `json:"ratio"`
	Tags   []string          `json:"tags"`
	Counts map[string]int    `json:"counts"`
	ByID   map[int]string    `json:"byId"`
	Next   *concrete         `json:"next,omitempty"`
	Bytes  []byte            `json:"bytes"`
	Fixed  [2]uint8          `json:"fixed"`
	Attrs  map[string]string `json:"attrs,omitempty"`
}

// selfCoded holds an interface but encodes and decodes itself.
type selfCoded struct {
	S fmt.Stringer
}

func (s selfCoded) MarshalJSON() ([]byte, error) { return json.Marshal(s.S.String()) }

func (s *selfCoded) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.S = stringer(v)
	return nil
}

type list struct {
	V    int   `json:"v"`
	Next *list `json:"next"`
}

type tree struct {
	Name string `json:"name"`
	Kids []tree `json:"kids"`
}

type withTime struct {
	At time.Time `json:"at"`
}

type withRaw struct {
	Detail json.RawMessage `json:"detail"`
}

type withAny struct {
	ID    string `json:"id"`
	Extra any    `json:"extra"`
}

type withIgnored struct {
	ID      string   `json:"id"`
	Done    chan int `json:"-"`
	private func()
	hidden  error
}

type withQuoted struct {
	N int64  `json:"n,string"`
	S string `json:"s,string"`
}

func TestWrapAcceptsTypesJSONReplays(t *testing.T) {
	t.Parallel()
	t.Run("struct", replaysEqual(concrete{ID: "c", Amount: -5, Ratio: 0.1, Tags: []string{"a"},
		Counts: map[string]int{"x": 1}, ByID: map[int]string{7: "seven"}, Next: &concrete{ID: "n"},
		Bytes: []byte{0, 0xff}, Fixed: [2]uint8{1, 2}}))
	t.Run("pointer", replaysEqual(&concrete{ID: "p"}))
	t.Run("nil pointer", replaysEqual[*concrete](nil))
	t.Run("map of concrete values", replaysEqual(map[string][]int{"a": {1, 2}, "b": nil}))
	t.Run("text-marshaling map keys", replaysEqual(map[netip.Addr]int{netip.MustParseAddr("10.0.0.1"): 1}))
	t.Run("json.RawMessage, compact", replaysEqual(json.RawMessage(`{"a":[1,2,{"b":null}]}`)))
	t.Run("json.RawMessage field", replaysEqual(withRaw{Detail: json.RawMessage(`[1,"x"]`)}))
	t.Run("time.Time field", replaysEqual(withTime{At: time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)}))
	t.Run("type with UnmarshalJSON holding an interface", replaysEqual(selfCoded{S: stringer("hi")}))
	t.Run("recursive list", replaysEqual(&list{V: 1, Next: &list{V: 2}}))
	t.Run("recursive tree", replaysEqual(tree{Name: "r", Kids: []tree{{Name: "a", Kids: []tree{{Name: "b"}}}}}))
	t.Run("map[string]any of JSON-native values", replaysEqual(map[string]any{
		"n": 1.5, "s": "x", "b": true, "nil": nil, "list": []any{1.0, "y", map[string]any{"z": false}}, "obj": map[string]any{},
	}))
	t.Run("[]any of JSON-native values", replaysEqual([]any{nil, 2.0, "s", []any{}}))
	t.Run("any field holding nil", replaysEqual(withAny{ID: "a"}))
	t.Run("any field holding float64", replaysEqual(withAny{ID: "a", Extra: 3.25}))
	t.Run("any field holding an object", replaysEqual(withAny{ID: "a", Extra: map[string]any{"k": []any{"v"}}}))
	t.Run("promoted any and map", replaysEqual(withPromoted{ID: "p", extras: extras{
		Extra: map[string]any{"a": []any{1.0, "\uFFFD"}}, Labels: map[string]string{"\uFFFD": `\ufffd`}}}))
	t.Run("ignored and unexported fields", replaysEqual(withIgnored{ID: "i", private: nil, hidden: nil}))
	t.Run("json string option", replaysEqual(withQuoted{N: math.MaxInt64, S: "q\uFFFD"}))
	t.Run("string", replaysEqual("plain"))
	t.Run("empty struct", replaysEqual(struct{}{}))
}

// A custom codec is trusted: its round trip is its author's business.
type customJSON struct{}

func (customJSON) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (customJSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func TestCustomCodecIsNotChecked(t *testing.T) {
	t.Parallel()
	require.NotPanics(t, wrapOf[fmt.Stringer](idempotent.WithCodec(customJSON{}.Marshal, customJSON{}.Unmarshal)))
	require.NotPanics(t, wrapOf[struct{ C chan int }](idempotent.WithCodec(customJSON{}.Marshal, customJSON{}.Unmarshal)))

	h := idempotent.Wrap(idempotent.New(idempotent.NewMemoryStore(), idempotent.WithCodec(customJSON{}.Marshal, customJSON{}.Unmarshal), quiet), func(context.Context, order) (withAny, error) {
		return withAny{Extra: 1}, nil
	}, idempotent.WithKey(orderKey))
	_, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err, "not checked")
	again, err := h(context.Background(), order{ID: "o"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, again.Extra, "what this codec gives back")
}

// notReplayed runs a handler returning v, which a replay would not give back
// equal: the caller gets v and ErrResponseEncoding, the record is completed
// without the response, and a duplicate gets ErrResponseNotStored without
// running the handler again. It returns the first call's error.
func notReplayed[Out any](v Out) func(t *testing.T) error {
	return func(t *testing.T) error {
		store := newSpyStore()
		var runs atomic.Int32
		var got outcomes
		h := idempotent.Wrap(idempotent.New(store, idempotent.WithOutcomeHook(got.hook), quiet), func(context.Context, order) (Out, error) {
			runs.Add(1)
			return v, nil
		}, idempotent.WithKey(orderKey))
		first, err := h(context.Background(), order{ID: "o"})
		require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
		assert.Equal(t, v, first, "the caller still gets its response")
		assert.Zero(t, store.releases.Load(), "not released: a retry would repeat the side effect")

		_, err2 := h(context.Background(), order{ID: "o"})
		require.ErrorIs(t, err2, idempotent.ErrResponseNotStored)
		assert.EqualValues(t, 1, runs.Load(), "the handler does not run again")
		assert.Equal(t, []idempotent.Outcome{idempotent.OutcomeNotStored, idempotent.OutcomeResponseNotStored}, got.list())
		return err
	}
}

type point struct{ X, Y int }

type withAnyItems struct {
	Items []withAny `json:"items"`
}

// extras is an unexported embedded struct, whose exported fields
// encoding/json promotes.
type extras struct {
	Extra  any               `json:"extra"`
	Labels map[string]string `json:"labels"`
}

type withPromoted struct {
	extras
	ID string `json:"id"`
}

type withNames struct {
	Items []struct{ Name string } `json:"items"`
}

func TestResponseThatWouldNotReplayEqual(t *testing.T) {
	t.Parallel()
	const (
		prefix     = "idempotent: response cannot be serialized: "
		notNative  = "(an interface value comes back as it went only when it is nil, bool, float64, string, []any or map[string]any of those)"
		replaceFFD = "(encoding/json replaces the invalid bytes with U+FFFD)"
	)
	for _, tt := range []struct {
		name string
		run  func(t *testing.T) error
		want string
	}{
		{"any field holding an int", notReplayed(withAny{ID: "a", Extra: 42}),
			prefix + "response.Extra holds a value of type int, which a JSON replay gives back as float64 " + notNative},
		{"any field holding an int64 above 2^53", notReplayed(withAny{Extra: int64(1)<<53 + 1}),
			"response.Extra holds a value of type int64, which a JSON replay gives back as float64"},
		{"any field holding a struct", notReplayed(withAny{Extra: point{1, 2}}),
			"response.Extra holds a value of type idempotent_test.point, which a JSON replay gives back as map[string]interface {}"},
		{"any field holding json.Number", notReplayed(withAny{Extra: json.Number("1")}),
			"response.Extra holds a value of type json.Number, which a JSON replay gives back as float64"},
		{"any field holding a typed nil pointer", notReplayed(withAny{Extra: (*point)(nil)}),
			"response.Extra holds a nil *idempotent_test.point, which a JSON replay gives back as nil"},
		{"any field holding a []string", notReplayed(withAny{Extra: []string{"a"}}),
			"response.Extra holds a value of type []string, which a JSON replay gives back as []interface {}"},
		{"int deep in a map[string]any", notReplayed(map[string]any{"a": []any{1.0, map[string]any{"n": 7}}}),
			`response["a"][1]["n"] holds a value of type int, which a JSON replay gives back as float64`},
		{"any in a slice element", notReplayed(withAnyItems{Items: []withAny{{}, {}, {}, {Extra: uint8(1)}}}),
			"response.Items[3].Extra holds a value of type uint8"},
		{"invalid UTF-8 string", notReplayed(concrete{ID: "a\xffb"}),
			prefix + "response.ID is not valid UTF-8 " + replaceFFD},
		{"invalid UTF-8 in a slice element", notReplayed(withNames{Items: []struct{ Name string }{{"ok"}, {"ok"}, {"ok"}, {"\xc3"}}}),
			"response.Items[3].Name is not valid UTF-8"},
		{"invalid UTF-8 map key", notReplayed(concrete{Counts: map[string]int{"k\xff": 1}}),
			`response.Counts has a map key that is not valid UTF-8 ("k\xff"; encoding/json replaces the invalid bytes with U+FFFD)`},
		{"invalid UTF-8 map value", notReplayed(map[string]string{"k": "v\xff"}), `response["k"] is not valid UTF-8`},
		{"invalid UTF-8 in an any", notReplayed(withAny{Extra: []any{"\xff"}}), "response.Extra[0] is not valid UTF-8"},
		{"invalid UTF-8 string of the response", notReplayed("\xff"), prefix + "response is not valid UTF-8"},
		{"invalid UTF-8 in a json string option field", notReplayed(withQuoted{S: "a\xffb"}), "response.S is not valid UTF-8"},
		{"promoted any holding an int", notReplayed(withPromoted{extras: extras{Extra: []any{"a", 1}}}),
			"response.extras.Extra[1] holds a value of type int, which a JSON replay gives back as float64"},
		{"promoted any holding an invalid string", notReplayed(withPromoted{extras: extras{Extra: map[string]any{"k": "\xff"}}}),
			`response.extras.Extra["k"] is not valid UTF-8`},
		{"promoted map with an invalid key", notReplayed(withPromoted{extras: extras{Labels: map[string]string{"\xff": "v"}}}),
			`response.extras.Labels has a map key that is not valid UTF-8 ("\xff"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.run(t)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// TestAnyHoldingIntIsNotStored is the first row above, spelled out.
func TestAnyHoldingIntIsNotStored(t *testing.T) {
	t.Parallel()
	store := newSpyStore()
	var runs atomic.Int32
	h := idempotent.Wrap(idempotent.New(store, quiet), func(context.Context, order) (withAny, error) {
		runs.Add(1)
		return withAny{ID: "a", Extra: 42}, nil
	}, idempotent.WithKey(orderKey))

	out, err := h(context.Background(), order{ID: "o"})
	require.ErrorIs(t, err, idempotent.ErrResponseEncoding)
	assert.Equal(t, withAny{ID: "a", Extra: 42}, out)
	assert.EqualValues(t, 1, store.completes.Load(), "completed, without the response")
	for range 2 {
		_, err = h(context.Background(), order{ID: "o"})
		require.ErrorIs(t, err, idempotent.ErrResponseNotStored)
	}
	assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
}

func TestReplacementCharacterReplaysEqual(t *testing.T) {
	t.Parallel()
	t.Run("valid U+FFFD", replaysEqual(concrete{ID: "a\uFFFDb", Counts: map[string]int{"\uFFFD": 1}}))
	t.Run("literal backslash-ufffd", replaysEqual(concrete{ID: `a\ufffdb`, Tags: []string{`\\ufffd`, `\\\ufffd`}}))
	t.Run("literal backslash-ufffd in an any", replaysEqual(withAny{Extra: map[string]any{`\ufffd`: `\ufffd`}}))
	t.Run("literal backslash-ufffd in a json string option field", replaysEqual(withQuoted{S: `\ufffd`}))
	t.Run("json.RawMessage holding the escape", replaysEqual(json.RawMessage(`"\ufffd"`)))
}

func TestLargeInt64ReplaysExactly(t *testing.T) {
	t.Parallel()
	t.Run("field", replaysEqual(concrete{Amount: 1<<62 + 1}))
	t.Run("max", replaysEqual(concrete{Amount: math.MaxInt64, ByID: map[int]string{math.MinInt64: "min"}}))
	t.Run("uint64", replaysEqual(uint64(math.MaxUint64)))
}

// A response that json cannot encode at all is still ErrResponseEncoding,
// as before, and its message is json's.
func TestUnencodableValueStillErrResponseEncoding(t *testing.T) {
	t.Parallel()
	err := notReplayed(map[string]float64{"ratio": math.Inf(1)})(t)
	assert.ErrorContains(t, err, "json: unsupported value: +Inf")
	var unsupported *json.UnsupportedValueError
	assert.True(t, errors.As(err, &unsupported))
	assert.False(t, strings.Contains(err.Error(), "response."), "no path: json's own error")
}
