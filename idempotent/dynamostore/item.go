package dynamostore

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The item is built and read by hand, not with attributevalue's reflection:
// Claim and Complete are on every invocation's path, and decoding must be
// strict about each attribute's type.

func attrS(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

// suspendedValue is the value of Options.SuspendedAttr in a suspended
// record, shared by all calls (the SDK only reads its inputs).
var suspendedValue = &types.AttributeValueMemberBOOL{Value: true}

func attrN(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// key returns the primary key of the item holding record id.
func (s *Store) key(id string) map[string]types.AttributeValue {
	return s.keyOf(attrS(id))
}

// keyOf is key for the record id's value id.
func (s *Store) keyOf(id types.AttributeValue) map[string]types.AttributeValue {
	if s.opts.SortKeyAttr == "" {
		return map[string]types.AttributeValue{s.opts.KeyAttr: id}
	}
	return map[string]types.AttributeValue{s.opts.KeyAttr: s.staticPK, s.opts.SortKeyAttr: id}
}

// claimItem is the item a claim writes: every field of rec, leaving out the
// optional ones that are empty, its values from vals (see requestValues).
func (s *Store) claimItem(rec *storage.Record, vals *requestValues) map[string]types.AttributeValue {
	o := &s.opts
	// 8 fits one map group: every claim's item but one with a sort key, a
	// fingerprint and data at once (which grows once).
	item := make(map[string]types.AttributeValue, 8)
	if o.SortKeyAttr == "" {
		item[o.KeyAttr] = vals.str(rec.ID)
	} else {
		item[o.KeyAttr] = s.staticPK
		item[o.SortKeyAttr] = vals.str(rec.ID)
	}
	item[o.StatusAttr] = vals.status(rec.Status)
	item[o.ExpirationAttr] = vals.num(rec.ExpiresAt.Unix())
	if !rec.LeaseExpiresAt.IsZero() {
		item[o.InProgressExpirationAttr] = vals.num(rec.LeaseExpiresAt.UnixMilli())
	}
	item[o.LeaseAttr] = vals.lease(rec.Lease)
	if rec.Fingerprint != "" {
		item[o.ValidationAttr] = vals.fingerprint(rec.Fingerprint)
	}
	if len(rec.Data) > 0 {
		item[o.DataAttr] = &types.AttributeValueMemberB{Value: rec.Data}
	}
	// Trace is left out: a claimed record holds none (storage.Record.Trace).
	if rec.Version == storage.RecordVersion {
		item[o.VersionAttr] = recordVersionValue
	} else {
		item[o.VersionAttr] = vals.num(int64(rec.Version))
	}
	return item
}

// requestValues are the string and number attribute values of one request,
// allocated together: one allocation where one per value was made before,
// on Claim's and Complete's path, which every invocation takes (issue 35
// bounds its instructions: 13 allocations fewer per new key). The SDK only
// reads its inputs, so the item and the expression share the lease and the
// fingerprint, and shared constants stand for the statuses. A request that
// needs more values than it has room for gets the rest one by one.
type requestValues struct {
	s      [4]types.AttributeValueMemberS
	n      [4]types.AttributeValueMemberN
	ns, nn int
	leaseV *types.AttributeValueMemberS
	fpV    *types.AttributeValueMemberS
}

// str returns the string value v.
func (r *requestValues) str(v string) *types.AttributeValueMemberS {
	if r.ns == len(r.s) {
		return attrS(v)
	}
	a := &r.s[r.ns]
	a.Value = v
	r.ns++
	return a
}

// num returns the number value v.
func (r *requestValues) num(v int64) *types.AttributeValueMemberN {
	if r.nn == len(r.n) {
		return attrN(v)
	}
	a := &r.n[r.nn]
	a.Value = strconv.FormatInt(v, 10)
	r.nn++
	return a
}

// lease returns the lease's value, the same each time it is asked for.
func (r *requestValues) lease(v string) *types.AttributeValueMemberS {
	if r.leaseV == nil || r.leaseV.Value != v {
		r.leaseV = r.str(v)
	}
	return r.leaseV
}

// fingerprint returns the fingerprint's value, the same each time.
func (r *requestValues) fingerprint(v string) *types.AttributeValueMemberS {
	if r.fpV == nil || r.fpV.Value != v {
		r.fpV = r.str(v)
	}
	return r.fpV
}

// status returns st's value: a shared one for the two a record takes.
func (r *requestValues) status(st storage.Status) types.AttributeValue {
	switch st {
	case storage.StatusInProgress:
		return inProgressAttrValue
	case storage.StatusCompleted:
		return completedAttrValue
	}
	return r.str(string(st))
}

// completedSize is the size of the item rec's completion leaves in the table,
// by DynamoDB's rule (ItemSize), counted on rec without building the item.
func (s *Store) completedSize(rec *storage.Record) int {
	o := &s.opts
	n := len(o.KeyAttr)
	if o.SortKeyAttr == "" {
		n += len(rec.ID)
	} else {
		n += len(o.StaticPartitionKey) + len(o.SortKeyAttr) + len(rec.ID)
	}
	n += len(o.StatusAttr) + len(rec.Status)
	n += len(o.ExpirationAttr) + intSize(rec.ExpiresAt.Unix())
	n += len(o.LeaseAttr) + len(rec.Lease)
	if rec.Fingerprint != "" {
		n += len(o.ValidationAttr) + len(rec.Fingerprint)
	}
	if len(rec.Data) > 0 {
		n += len(o.DataAttr) + len(rec.Data)
	}
	if rec.Trace != "" {
		n += len(o.TraceAttr) + len(rec.Trace)
	}
	n += len(o.VersionAttr) + intSize(int64(rec.Version))
	return n
}

// decode reads a stored item into a Record. It is strict: a missing required
// attribute, a wrong type or an unparsable number yields an error wrapping
// storage.ErrCorruptRecord that names the attribute. The status is not
// checked (the wrapper refuses unknown ones), and an item without a version
// decodes with Version 0 (the wrapper refuses it as foreign).
func (s *Store) decode(item map[string]types.AttributeValue) (storage.Record, error) {
	d := decoder{item: item}
	rec := s.readHead(&d)
	rec.Steps = d.steps(s.opts.StepsAttr)
	if d.err != nil {
		return storage.Record{}, d.err
	}
	return rec, nil
}

// decodeRecordHead is decode without the steps: what the liveness rule needs. A
// claim decides on it, so that a damaged steps attribute does not keep a
// record that may be replaced anyway from being replaced.
func (s *Store) decodeRecordHead(item map[string]types.AttributeValue) (storage.Record, error) {
	d := decoder{item: item}
	rec := s.readHead(&d)
	if d.err != nil {
		return storage.Record{}, d.err
	}
	return rec, nil
}

// decodeSteps reads only the steps attribute of item.
func (s *Store) decodeSteps(item map[string]types.AttributeValue) ([]storage.Step, error) {
	d := decoder{item: item}
	steps := d.steps(s.opts.StepsAttr)
	return steps, d.err
}

// readHead reads every attribute of a record but its steps.
func (s *Store) readHead(d *decoder) storage.Record {
	o := &s.opts
	var rec storage.Record
	idAttr := o.KeyAttr
	if o.SortKeyAttr != "" {
		idAttr = o.SortKeyAttr
	}
	rec.ID, _ = d.str(idAttr, true)
	status, _ := d.str(o.StatusAttr, true)
	rec.Status = storage.Status(status)
	if exp, ok := d.num(o.ExpirationAttr, true, 64); ok {
		rec.ExpiresAt = time.Unix(exp, 0)
	}
	// An INPROGRESS record without a lease end could never be taken over by
	// the claim condition: it is damaged, not live.
	if ms, ok := d.num(o.InProgressExpirationAttr, rec.Status == storage.StatusInProgress, 64); ok {
		rec.LeaseExpiresAt = time.UnixMilli(ms)
	}
	rec.Lease, _ = d.str(o.LeaseAttr, true)
	rec.Fingerprint, _ = d.str(o.ValidationAttr, false)
	rec.Data = d.bin(o.DataAttr)
	rec.Trace, _ = d.str(o.TraceAttr, false)
	if v, ok := d.num(o.VersionAttr, false, strconv.IntSize); ok {
		rec.Version = int(v)
	}
	// Absent (every record but a suspended one, and every record written
	// before the attribute existed) reads as false.
	rec.Suspended = d.boolean(o.SuspendedAttr)
	return rec
}

// The keys of a stored step's map.
const (
	stepNameKey = "name"
	stepDataKey = "data"
)

// stepValue is a step as an element of the steps list. An empty result is
// left out rather than stored as an empty binary.
func stepValue(st *storage.Step) *types.AttributeValueMemberM {
	m := make(map[string]types.AttributeValue, 2)
	m[stepNameKey] = attrS(st.Name)
	if len(st.Data) > 0 {
		m[stepDataKey] = &types.AttributeValueMemberB{Value: st.Data}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// stepSize is what one step adds to the steps list by DynamoDB's rule
// (ItemSize): an element holding a map of its name and data, each with its
// element's byte.
func stepSize(st *storage.Step) int {
	n := elementBytes + containerBytes + elementBytes + len(stepNameKey) + len(st.Name)
	if len(st.Data) > 0 {
		n += elementBytes + len(stepDataKey) + len(st.Data)
	}
	return n
}

// minStepItemSize is a lower bound of the size of the item holding record
// id under lease once st is appended: the key, the status, the lease, the
// steps list holding st alone, and the smallest possible numbers. AppendStep
// refuses a step past the limit by this bound without a call; what the
// bound leaves out is DynamoDB's to refuse.
func (s *Store) minStepItemSize(id, lease string, st *storage.Step) int {
	o := &s.opts
	n := len(o.KeyAttr)
	if o.SortKeyAttr == "" {
		n += len(id)
	} else {
		n += len(o.StaticPartitionKey) + len(o.SortKeyAttr) + len(id)
	}
	n += len(o.StatusAttr) + len(storage.StatusInProgress)
	n += len(o.ExpirationAttr) + 1 + len(o.InProgressExpirationAttr) + 1
	n += len(o.LeaseAttr) + len(lease)
	n += len(o.StepsAttr) + containerBytes + stepSize(st)
	return n
}

// decoder reads typed attributes, keeping the first error.
type decoder struct {
	item map[string]types.AttributeValue
	err  error
}

func (d *decoder) fail(attr, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: attribute %q %s", storage.ErrCorruptRecord, attr, fmt.Sprintf(format, args...))
	}
}

// get returns the attribute, recording an error if a required one is missing.
func (d *decoder) get(attr string, required bool) (types.AttributeValue, bool) {
	av, ok := d.item[attr]
	if !ok {
		if required {
			d.fail(attr, "is missing")
		}
		return nil, false
	}
	return av, true
}

func (d *decoder) str(attr string, required bool) (string, bool) {
	av, ok := d.get(attr, required)
	if !ok {
		return "", false
	}
	v, isS := av.(*types.AttributeValueMemberS)
	if !isS || v == nil {
		d.fail(attr, "is %s, want S", kind(av))
		return "", false
	}
	return v.Value, true
}

func (d *decoder) num(attr string, required bool, bits int) (int64, bool) {
	av, ok := d.get(attr, required)
	if !ok {
		return 0, false
	}
	v, isN := av.(*types.AttributeValueMemberN)
	if !isN || v == nil {
		d.fail(attr, "is %s, want N", kind(av))
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, bits)
	if err != nil {
		d.fail(attr, "holds %q, want an integer of %d bits", v.Value, bits)
		return 0, false
	}
	return n, true
}

// steps reads the steps list: absent is none; every element must be a map
// with a name (S) and, optionally, data (B). Other keys are ignored, as
// unknown attributes are.
func (d *decoder) steps(attr string) []storage.Step {
	av, ok := d.get(attr, false)
	if !ok {
		return nil
	}
	l, isL := av.(*types.AttributeValueMemberL)
	if !isL || l == nil {
		d.fail(attr, "is %s, want L", kind(av))
		return nil
	}
	if len(l.Value) == 0 {
		return nil
	}
	steps := make([]storage.Step, 0, len(l.Value))
	var seen map[string]int // name -> index in steps
	for i, el := range l.Value {
		m, isM := el.(*types.AttributeValueMemberM)
		if !isM || m == nil {
			d.fail(attr, "element %d is %s, want M", i, kind(el))
			return nil
		}
		name, isS := m.Value[stepNameKey].(*types.AttributeValueMemberS)
		if !isS || name == nil {
			d.fail(attr, "element %d: %q is %s, want S", i, stepNameKey, kindOrMissing(m.Value, stepNameKey))
			return nil
		}
		st := storage.Step{Name: name.Value}
		if dv, present := m.Value[stepDataKey]; present {
			data, isB := dv.(*types.AttributeValueMemberB)
			if !isB || data == nil {
				d.fail(attr, "element %d: %q is %s, want B", i, stepDataKey, kind(dv))
				return nil
			}
			st.Data = data.Value
		}
		// An SDK retry of an AppendStep whose response was lost appends
		// the step a second time (list_append has no condition that could
		// tell). Names are unique within a record, so a step repeated
		// with the same result is that replayed write: keep the first.
		if j, dup := seen[st.Name]; dup && bytes.Equal(steps[j].Data, st.Data) {
			continue
		}
		if seen == nil {
			seen = make(map[string]int, len(l.Value))
		}
		seen[st.Name] = len(steps)
		steps = append(steps, st)
	}
	return steps
}

// kindOrMissing is kind of m[key], or "missing".
func kindOrMissing(m map[string]types.AttributeValue, key string) string {
	av, ok := m[key]
	if !ok {
		return "missing"
	}
	return kind(av)
}

// boolean reads an optional BOOL attribute; absent is false.
func (d *decoder) boolean(attr string) bool {
	av, ok := d.get(attr, false)
	if !ok {
		return false
	}
	v, isBool := av.(*types.AttributeValueMemberBOOL)
	if !isBool || v == nil {
		d.fail(attr, "is %s, want BOOL", kind(av))
		return false
	}
	return v.Value
}

func (d *decoder) bin(attr string) []byte {
	av, ok := d.get(attr, false)
	if !ok {
		return nil
	}
	v, isB := av.(*types.AttributeValueMemberB)
	if !isB || v == nil {
		d.fail(attr, "is %s, want B", kind(av))
		return nil
	}
	return v.Value
}

// kind names an attribute value's DynamoDB type.
func kind(av types.AttributeValue) string {
	switch v := av.(type) {
	case nil:
		return "empty"
	case *types.AttributeValueMemberS:
		if v == nil {
			return "a nil S"
		}
		return "S"
	case *types.AttributeValueMemberN:
		if v == nil {
			return "a nil N"
		}
		return "N"
	case *types.AttributeValueMemberB:
		if v == nil {
			return "a nil B"
		}
		return "B"
	case *types.AttributeValueMemberBOOL:
		if v == nil {
			return "a nil BOOL"
		}
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberM:
		if v == nil {
			return "a nil M"
		}
		return "M"
	case *types.AttributeValueMemberL:
		if v == nil {
			return "a nil L"
		}
		return "L"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	default:
		return fmt.Sprintf("%T", av)
	}
}
