package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The hash fields of a record: DynamoDB's default attribute names, so both
// stores read alike. The record ID is the key, not a field.
const (
	fieldStatus     = "status"                 // INPROGRESS or COMPLETED
	fieldExpiration = "expiration"             // epoch seconds, decimal
	fieldLeaseEnd   = "in_progress_expiration" // epoch milliseconds, decimal; INPROGRESS only
	fieldLease      = "lease"                  // the owner's lease token
	fieldValidation = "validation"             // the payload fingerprint; absent when empty
	fieldData       = "data"                   // the stored response, binary; absent when empty
	fieldVersion    = "version"                // the record format version, decimal
	fieldSteps      = "steps"                  // the finished steps, netstrings (see encodeStep); absent when none
	fieldSuspended  = "suspended"              // "1" when the owner suspended the record; absent otherwise
	fieldTrace      = "trace"                  // the trace context of the completing call; absent when none
)

// suspendedValue is the suspended field's one value. A record without the
// field is not suspended: records written before the field existed read so,
// which needs no format version change.
const suspendedValue = "1"

// maxKeyExpiryMs caps the key expiry passed to Redis: 2^53 ms (the year
// 287396) is the largest time the scripts' Lua numbers hold exactly, and a
// record that far out never expires in practice.
const maxKeyExpiryMs = 1 << 53

// keyExpiryMs is when Redis should delete the key of a record expiring at
// expires: the first millisecond of the second after expires, the first
// instant at which the record counts as expired (expiration < now, in whole
// seconds).
func keyExpiryMs(expires time.Time) int64 {
	s := expires.Unix()
	if s >= maxKeyExpiryMs/1000 {
		return maxKeyExpiryMs
	}
	if s < 0 {
		return 0 // long past: the scripts refuse it
	}
	return (s + 1) * 1000
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// claimFields appends the field/value pairs of a record as a claim writes it,
// leaving out the optional fields that are empty.
func claimFields(args []any, rec *storage.Record) []any {
	args = append(args,
		fieldStatus, string(rec.Status),
		fieldExpiration, itoa(rec.ExpiresAt.Unix()),
	)
	if !rec.LeaseExpiresAt.IsZero() {
		args = append(args, fieldLeaseEnd, itoa(rec.LeaseExpiresAt.UnixMilli()))
	}
	args = append(args, fieldLease, rec.Lease)
	if rec.Fingerprint != "" {
		args = append(args, fieldValidation, rec.Fingerprint)
	}
	if len(rec.Data) > 0 {
		args = append(args, fieldData, rec.Data)
	}
	// Trace is left out: a claimed record holds none (storage.Record.Trace).
	return append(args, fieldVersion, itoa(int64(rec.Version)))
}

// completedSize is the size of the hash rec's completion leaves in Redis: the
// key's length plus the lengths of every field name and value. Redis's own
// per-key and per-field overhead (some tens of bytes) is not counted, so the
// limit measures what the record holds, as DynamoDB's does.
func completedSize(key string, rec *storage.Record) int {
	n := len(key)
	n += len(fieldStatus) + len(rec.Status)
	n += len(fieldExpiration) + len(itoa(rec.ExpiresAt.Unix()))
	n += len(fieldLease) + len(rec.Lease)
	if rec.Fingerprint != "" {
		n += len(fieldValidation) + len(rec.Fingerprint)
	}
	if len(rec.Data) > 0 {
		n += len(fieldData) + len(rec.Data)
	}
	if rec.Trace != "" {
		n += len(fieldTrace) + len(rec.Trace)
	}
	n += len(fieldVersion) + len(itoa(int64(rec.Version)))
	return n
}

// decodeHash reads a record from the flat field/value list of HGETALL. It is
// strict: an odd list, a non-string element, a missing status, expiration or
// lease, a number that is not a plain decimal integer, or a steps value that
// does not decode (see decodeSteps) yields an error
// wrapping storage.ErrCorruptRecord that names the field. Unknown fields
// are ignored. The status is not checked (the wrapper refuses unknown ones),
// and a hash without a version decodes with Version 0 (the wrapper refuses it
// as foreign).
func decodeHash(id string, flat []any) (storage.Record, error) {
	if len(flat)%2 != 0 {
		return storage.Record{}, fmt.Errorf("%w: hash reply has %d elements, want field/value pairs", storage.ErrCorruptRecord, len(flat))
	}
	fields := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		name, ok := flat[i].(string)
		if !ok {
			return storage.Record{}, fmt.Errorf("%w: hash field name is a %T, want a string", storage.ErrCorruptRecord, flat[i])
		}
		value, ok := flat[i+1].(string)
		if !ok {
			return storage.Record{}, fmt.Errorf("%w: field %q is a %T, want a string", storage.ErrCorruptRecord, name, flat[i+1])
		}
		fields[name] = value
	}
	d := decoder{fields: fields}
	rec := storage.Record{ID: id}
	status, _ := d.str(fieldStatus, true)
	rec.Status = storage.Status(status)
	if exp, ok := d.int(fieldExpiration, true, 64); ok {
		rec.ExpiresAt = time.Unix(exp, 0)
	}
	if ms, ok := d.int(fieldLeaseEnd, false, 64); ok {
		rec.LeaseExpiresAt = time.UnixMilli(ms)
	}
	rec.Lease, _ = d.str(fieldLease, true)
	rec.Fingerprint, _ = d.str(fieldValidation, false)
	rec.Trace, _ = d.str(fieldTrace, false)
	if data, ok := d.str(fieldData, false); ok {
		rec.Data = []byte(data)
	}
	if v, ok := d.int(fieldVersion, false, strconv.IntSize); ok {
		rec.Version = int(v)
	}
	if v, ok := d.str(fieldSuspended, false); ok {
		if v != suspendedValue {
			d.fail(fieldSuspended, "is %q, want %q", v, suspendedValue)
		}
		rec.Suspended = v == suspendedValue
	}
	if v, ok := d.str(fieldSteps, false); ok {
		steps, err := decodeSteps(v)
		if err != nil {
			d.fail(fieldSteps, "is malformed: %v", err)
		}
		rec.Steps = steps
	}
	if d.err != nil {
		return storage.Record{}, d.err
	}
	return rec, nil
}

// decoder reads fields, keeping the first error.
type decoder struct {
	fields map[string]string
	err    error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: field %q %s", storage.ErrCorruptRecord, field, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) str(field string, required bool) (string, bool) {
	v, ok := d.fields[field]
	if !ok && required {
		d.fail(field, "is missing")
	}
	return v, ok
}

// int parses a plain decimal integer: an optional minus sign and digits,
// nothing else (no "+", spaces, exponent or base prefix), as the scripts do.
func (d *decoder) int(field string, required bool, bits int) (int64, bool) {
	v, ok := d.str(field, required)
	if !ok {
		return 0, false
	}
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	plain := len(digits) > 0
	for i := 0; i < len(digits) && plain; i++ {
		plain = digits[i] >= '0' && digits[i] <= '9'
	}
	if !plain {
		d.fail(field, "is %q, want a decimal integer", v)
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		d.fail(field, "is %q: out of range", v)
		return 0, false
	}
	return n, true
}

// The steps field holds a record's finished steps in the order they were
// appended, each as two netstrings, its name then its data:
//
//	<len(name)>:<name>,<len(data)>:<data>,
//
// with lengths in decimal bytes, so "charge" with data {"id":1} is
// 6:charge,8:{"id":1},. Lengths make the encoding binary-safe (names and data
// may hold any byte, ":" and "," included) and the trailing commas catch a
// truncated or misaligned value. One field rather than a field per step keeps
// the whole record readable by one HGETALL, lets a claim carry the steps over
// with a single HGET/HSET, and lets AppendStep add a step by concatenation:
// the scripts never parse it, except the claim's check that a value it is
// about to keep decodes (validStepsLua, a copy of decodeSteps' rules).

// encodeStep returns step in the steps field's encoding, ready to be
// appended to the field.
func encodeStep(step storage.Step) string {
	b := make([]byte, 0, len(step.Name)+len(step.Data)+2*(len(":,")+20))
	b = appendNetstring(b, step.Name)
	b = appendNetstring(b, string(step.Data))
	return string(b)
}

func appendNetstring(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	b = append(b, s...)
	return append(b, ',')
}

// decodeSteps reads a steps field. The empty value holds no steps (nil). A
// value that is not a whole number of name/data netstring pairs yields an
// error (callers wrap it in storage.ErrCorruptRecord) naming the byte
// offset where decoding failed.
func decodeSteps(v string) ([]storage.Step, error) {
	var steps []storage.Step
	for off := 0; off < len(v); {
		name, n, err := cutNetstring(v, off)
		if err != nil {
			return nil, fmt.Errorf("step %d name: %w", len(steps)+1, err)
		}
		off = n
		data, n, err := cutNetstring(v, off)
		if err != nil {
			return nil, fmt.Errorf("step %d (%q) data: %w", len(steps)+1, name, err)
		}
		off = n
		if repeatOf(steps, name, data) {
			// A retried AppendStep whose first answer was lost (go-redis
			// retries a script on a network error) appends the same step
			// again: names are unique within a record, so the repeat is it.
			continue
		}
		step := storage.Step{Name: name}
		if len(data) > 0 {
			step.Data = []byte(data)
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// repeatOf reports whether steps already holds a step named name with data.
func repeatOf(steps []storage.Step, name, data string) bool {
	for _, st := range steps {
		if st.Name == name && string(st.Data) == data {
			return true
		}
	}
	return false
}

// cutNetstring reads the netstring of v at off and returns its content and
// the offset after it. The length is decimal digits only (no sign or
// spaces), as the claim script's check reads it.
func cutNetstring(v string, off int) (string, int, error) {
	i := off
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == off || i == len(v) || v[i] != ':' {
		return "", 0, fmt.Errorf("at byte %d: want a decimal length and \":\"", off)
	}
	n, err := strconv.Atoi(v[off:i])
	start := i + 1
	if err != nil || n > len(v)-start-1 {
		return "", 0, fmt.Errorf("at byte %d: length %s runs past the end (%d bytes)", off, v[off:i], len(v))
	}
	end := start + n
	if v[end] != ',' {
		return "", 0, fmt.Errorf("at byte %d: want \",\" after %d bytes", end, n)
	}
	return v[start:end], end + 1, nil
}
