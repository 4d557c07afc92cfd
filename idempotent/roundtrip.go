package idempotent

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// This file holds the checks behind "a replay equals the first response"
// for the default codec, encoding/json (the rule is stated at WithCodec).
// What the type of the response decides is decided once, when wrapping: Wrap
// panics for a type JSON cannot give back, and learns which checks the
// values of a type need. A type without an empty interface inside costs one
// scan of the encoded bytes per first run, and nothing else.

// replayCheck is what a response type needs checked for its replays to
// equal it under encoding/json.
type replayCheck struct {
	root *rtNode
}

type rtKind uint8

const (
	rtLeaf    rtKind = iota // a scalar, or a type that decodes itself: nothing inside is looked at
	rtString                // a string kind
	rtAny                   // an empty interface: decodes as nil, bool, float64, string, []any or map[string]any
	rtPointer               // elem
	rtList                  // slice or array; elem
	rtMap                   // key and elem
	rtStruct                // fields
)

// rtNode is one type reachable from the response type; recursive types make
// the graph cyclic.
type rtNode struct {
	kind      rtKind
	elem, key *rtNode
	fields    []rtField
	// hasAny and hasString: an empty interface, or a string (a map key
	// included), is reachable from here.
	hasAny, hasString bool
}

type rtField struct {
	index int
	name  string
	node  *rtNode
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()

	// stringKey is the key node of every map with string keys.
	stringKey = &rtNode{kind: rtString, hasString: true}
)

// newReplayCheck returns the checks a response of type Out needs under
// codec, or nil for a custom codec, which is trusted to round-trip. It panics
// when Out cannot come back equal from encoding/json whatever its value.
func newReplayCheck[Out any](c codec) *replayCheck {
	if c.custom {
		return nil
	}
	t := reflect.TypeFor[Out]()
	if t.Kind() == reflect.Interface {
		panic(fmt.Sprintf("idempotent: Wrap: response type %v is an interface: a JSON replay cannot give back the type the "+
			"handler returned (encoding/json decodes into an empty interface as map[string]any, []any, float64, string or "+
			"bool, and not at all into other interfaces); return a concrete type, or pass WithCodec a codec that round-trips it", t))
	}
	b := rtBuilder{nodes: make(map[reflect.Type]*rtNode)}
	root := b.node(t, "response")
	if b.err != "" {
		panic(fmt.Sprintf("idempotent: Wrap: response type %v cannot be replayed equal with encoding/json: %s", t, b.err))
	}
	b.propagate()
	return &replayCheck{root: root}
}

// rtBuilder builds the node graph of a type, remembering the first reason
// found to refuse it.
type rtBuilder struct {
	nodes map[reflect.Type]*rtNode
	all   []*rtNode
	err   string
}

const (
	fixInterface = "return a concrete type there, implement json.Unmarshaler on a type that holds it, " +
		"or pass WithCodec a codec that round-trips it"
	fixUnencodable = "leave it out of the response (a struct field can be tagged `json:\"-\"`), implement " +
		"json.Marshaler and json.Unmarshaler on a type that holds it, or pass WithCodec a codec that round-trips it"
)

func (b *rtBuilder) refuse(format string, args ...any) *rtNode {
	if b.err == "" {
		b.err = fmt.Sprintf(format, args...)
	}
	return &rtNode{}
}

// decodesItself reports a type that implements json.Unmarshaler or
// encoding.TextUnmarshaler (with a value or a pointer receiver): encoding/json
// hands it its own JSON, so its round trip is its author's.
func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType)
}

// node returns the node of t, reached at path (for messages).
func (b *rtBuilder) node(t reflect.Type, path string) *rtNode {
	if n, ok := b.nodes[t]; ok {
		return n
	}
	n := &rtNode{}
	b.nodes[t] = n // before descending: recursive types end here
	b.all = append(b.all, n)
	if t.Kind() != reflect.Interface && t.Kind() != reflect.Pointer && decodesItself(t) {
		return n // rtLeaf
	}
	switch t.Kind() {
	case reflect.String:
		n.kind = rtString
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return b.refuse("%s is of interface type %v, which encoding/json cannot decode into; %s", path, t, fixInterface)
		}
		n.kind = rtAny
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return b.refuse("%s is of type %v, which encoding/json cannot encode; %s", path, t, fixUnencodable)
	case reflect.Pointer:
		n.kind, n.elem = rtPointer, b.node(t.Elem(), path)
	case reflect.Slice, reflect.Array:
		n.kind, n.elem = rtList, b.node(t.Elem(), path+"[i]")
	case reflect.Map:
		n.kind = rtMap
		switch k := t.Key(); {
		case k.Kind() == reflect.String:
			n.key = stringKey // encoding/json writes it as a string, whatever its methods
		case k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr:
		case k.Implements(textMarshalerType) && reflect.PointerTo(k).Implements(textUnmarshalerType):
		default:
			return b.refuse("the keys of %s are of type %v, which encoding/json cannot use as map keys (it takes strings, "+
				"integers, and types implementing encoding.TextMarshaler and encoding.TextUnmarshaler); %s", path, k, fixUnencodable)
		}
		n.elem = b.node(t.Elem(), path+"[k]")
	case reflect.Struct:
		n.kind = rtStruct
		for i := range t.NumField() {
			sf := t.Field(i)
			if !jsonVisible(sf) {
				continue
			}
			fpath := path + "." + sf.Name
			if sf.Anonymous && !sf.IsExported() && sf.Type.Kind() == reflect.Pointer && hasVisibleField(sf.Type.Elem()) {
				return b.refuse("%s embeds a pointer to the unexported type %v, which encoding/json cannot allocate "+
					"when decoding; embed it by value, export it, or pass WithCodec a codec that round-trips it", path, sf.Type.Elem())
			}
			n.fields = append(n.fields, rtField{index: i, name: sf.Name, node: b.node(sf.Type, fpath)})
		}
	}
	return n
}

// jsonVisible reports a struct field that encoding/json encodes or decodes:
// exported fields and embedded structs (whose exported fields it promotes),
// unless tagged "-". Fields that json's name rules hide are visible here:
// checking one too many is safe.
func jsonVisible(sf reflect.StructField) bool {
	if sf.Tag.Get("json") == "-" {
		return false
	}
	if sf.Anonymous {
		t := sf.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return sf.IsExported() || t.Kind() == reflect.Struct
	}
	return sf.IsExported()
}

// hasVisibleField reports a struct type with a field encoding/json sees.
func hasVisibleField(t reflect.Type) bool {
	for i := range t.NumField() {
		if jsonVisible(t.Field(i)) {
			return true
		}
	}
	return false
}

// propagate sets hasAny and hasString from the leaves up, to a fixpoint
// (the graph may have cycles).
func (b *rtBuilder) propagate() {
	for _, n := range b.all {
		n.hasAny = n.kind == rtAny
		n.hasString = n.kind == rtString || n.kind == rtAny
	}
	for changed := true; changed; {
		changed = false
		for _, n := range b.all {
			anyIn, strIn := n.hasAny, n.hasString
			for _, c := range n.children() {
				anyIn, strIn = anyIn || c.hasAny, strIn || c.hasString
			}
			if anyIn != n.hasAny || strIn != n.hasString {
				n.hasAny, n.hasString, changed = anyIn, strIn, true
			}
		}
	}
}

func (n *rtNode) children() []*rtNode {
	var cs []*rtNode
	for _, c := range []*rtNode{n.elem, n.key} {
		if c != nil {
			cs = append(cs, c)
		}
	}
	for _, f := range n.fields {
		cs = append(cs, f.node)
	}
	return cs
}

// replacementEscape is how encoding/json writes an invalid UTF-8 byte in a
// string (a valid U+FFFD is written as it is).
var replacementEscape = []byte(`\ufffd`)

// replayable returns an error when out, encoded as raw by the default codec,
// would not be replayed equal (see WithCodec). Strings are looked at only
// when raw holds the escape \ufffd, which is how an invalid one shows. Any
// occurrence counts, whatever backslashes precede it (a `json:",string"`
// field escapes it once more), and the walk of out then decides: text that
// legitimately holds the escape costs a walk but is never refused.
func (w *wrapper[In, Out]) replayable(out Out, raw []byte) error {
	c := w.rt
	if c == nil {
		return nil
	}
	strs := c.root.hasString && bytes.Contains(raw, replacementEscape)
	if !c.root.hasAny && !strs {
		return nil
	}
	return walkResponse(c.root, reflect.ValueOf(any(out)), strs)
}

// walkResponse walks a response. The walk only reads what encoding/json
// reads (exported fields, promoted ones included, are never read-only to
// reflection); should it panic all the same, that is an error, not a crash
// after the handler ran.
func walkResponse(root *rtNode, v reflect.Value, strs bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("checking the response panicked: %v", r)
		}
	}()
	if werr := walk(root, v, strs); werr != nil {
		return werr
	}
	return nil
}

// rtError says where in a response a value would not come back equal; the
// path is built as the walk returns, so a walk that finds nothing allocates
// nothing.
type rtError struct {
	rev []string // path segments, innermost first
	msg string
}

func (e *rtError) at(seg string) *rtError {
	e.rev = append(e.rev, seg)
	return e
}

func (e *rtError) Error() string {
	var sb strings.Builder
	sb.WriteString("response")
	for i := len(e.rev) - 1; i >= 0; i-- {
		sb.WriteString(e.rev[i])
	}
	sb.WriteString(e.msg)
	return sb.String()
}

func indexSeg(i int) string { return fmt.Sprintf("[%d]", i) }

func keySeg(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return fmt.Sprintf("[%q]", k.String())
	}
	return fmt.Sprintf("[%v]", k)
}

func invalidString() *rtError {
	return &rtError{msg: " is not valid UTF-8 (encoding/json replaces the invalid bytes with U+FFFD)"}
}

func invalidKey(k string) *rtError {
	return &rtError{msg: fmt.Sprintf(" has a map key that is not valid UTF-8 (%q; encoding/json replaces the "+
		"invalid bytes with U+FFFD)", k)}
}

// needs reports whether the walk has anything to check below n.
func (n *rtNode) needs(strs bool) bool { return n.hasAny || strs && n.hasString }

// walk checks v, of n's type: every empty interface in it, and with strs
// every string and string map key.
func walk(n *rtNode, v reflect.Value, strs bool) *rtError {
	switch n.kind {
	case rtString:
		if strs && !utf8.ValidString(v.String()) {
			return invalidString()
		}
	case rtAny:
		return native(v.Interface(), strs)
	case rtPointer:
		if !v.IsNil() && n.elem.needs(strs) {
			return walk(n.elem, v.Elem(), strs)
		}
	case rtList:
		if v.Type() == listType && v.Len() > 0 {
			return native(v.Interface(), strs) // common, and cheaper without reflection
		}
		if n.elem.needs(strs) {
			for i := range v.Len() {
				if err := walk(n.elem, v.Index(i), strs); err != nil {
					return err.at(indexSeg(i))
				}
			}
		}
	case rtMap:
		if v.Type() == objectType && v.Len() > 0 {
			return native(v.Interface(), strs) // common, and cheaper without reflection
		}
		keys := strs && n.key != nil
		if (keys || n.elem.needs(strs)) && v.Len() > 0 {
			return walkMap(n, v, keys, strs)
		}
	case rtStruct:
		for _, f := range n.fields {
			if f.node.needs(strs) {
				if err := walk(f.node, v.Field(f.index), strs); err != nil {
					return err.at("." + f.name)
				}
			}
		}
	}
	return nil
}

// walkMap walks the entries of a map through one key and one value, not an
// allocation per entry.
func walkMap(n *rtNode, v reflect.Value, keys, strs bool) *rtError {
	k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
	for it := v.MapRange(); it.Next(); {
		k.SetIterKey(it)
		e.SetIterValue(it)
		if keys && !utf8.ValidString(k.String()) {
			return invalidKey(k.String())
		}
		if n.elem.needs(strs) {
			if err := walk(n.elem, e, strs); err != nil {
				return err.at(keySeg(k))
			}
		}
	}
	return nil
}

// native checks the value an empty interface holds: it must be what
// encoding/json decodes into an empty interface (and, with strs, hold valid
// strings only).
func native(x any, strs bool) *rtError {
	switch x := x.(type) {
	case nil, bool, float64:
		return nil
	case string:
		if strs && !utf8.ValidString(x) {
			return invalidString()
		}
		return nil
	case []any:
		if x != nil {
			for i, e := range x {
				if err := native(e, strs); err != nil {
					return err.at(indexSeg(i))
				}
			}
			return nil
		}
	case map[string]any:
		if x != nil {
			for k, e := range x {
				if strs && !utf8.ValidString(k) {
					return invalidKey(k)
				}
				if err := native(e, strs); err != nil {
					return err.at(fmt.Sprintf("[%q]", k))
				}
			}
			return nil
		}
	}
	return notNative(reflect.ValueOf(x))
}

var (
	listType   = reflect.TypeFor[[]any]()
	objectType = reflect.TypeFor[map[string]any]()
)

func notNative(v reflect.Value) *rtError {
	held := "a value of type " + v.Type().String()
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			held = "a nil " + v.Type().String()
		}
	}
	return &rtError{msg: fmt.Sprintf(" holds %s, which a JSON replay gives back as %s (an interface value comes back "+
		"as it went only when it is nil, bool, float64, string, []any or map[string]any of those)", held, jsonGivesBack(v))}
}

// jsonGivesBack names the type encoding/json decodes v's JSON into, in an
// empty interface. Only on the error path.
func jsonGivesBack(v reflect.Value) string {
	if !v.CanInterface() {
		return "another type"
	}
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return "an error"
	}
	var back any
	if err := json.Unmarshal(raw, &back); err != nil {
		return "an error"
	}
	if back == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", back)
}
