package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/idempotent"
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
)

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
	n += len(fieldVersion) + len(itoa(int64(rec.Version)))
	return n
}

// decodeHash reads a record from the flat field/value list of HGETALL. It is
// strict: an odd list, a non-string element, a missing status, expiration or
// lease, or a number that is not a plain decimal integer yields an error
// wrapping idempotent.ErrCorruptRecord that names the field. Unknown fields
// are ignored. The status is not checked (the wrapper refuses unknown ones),
// and a hash without a version decodes with Version 0 (the wrapper refuses it
// as foreign).
func decodeHash(id string, flat []any) (storage.Record, error) {
	if len(flat)%2 != 0 {
		return storage.Record{}, fmt.Errorf("%w: hash reply has %d elements, want field/value pairs", idempotent.ErrCorruptRecord, len(flat))
	}
	fields := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		name, ok := flat[i].(string)
		if !ok {
			return storage.Record{}, fmt.Errorf("%w: hash field name is a %T, want a string", idempotent.ErrCorruptRecord, flat[i])
		}
		value, ok := flat[i+1].(string)
		if !ok {
			return storage.Record{}, fmt.Errorf("%w: field %q is a %T, want a string", idempotent.ErrCorruptRecord, name, flat[i+1])
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
	if data, ok := d.str(fieldData, false); ok {
		rec.Data = []byte(data)
	}
	if v, ok := d.int(fieldVersion, false, strconv.IntSize); ok {
		rec.Version = int(v)
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
		d.err = fmt.Errorf("%w: field %q %s", idempotent.ErrCorruptRecord, field, fmt.Sprintf(format, args...))
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
