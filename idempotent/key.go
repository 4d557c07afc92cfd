package idempotent

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// maxKeyBytes is the longest idempotency key accepted (before hashing).
const maxKeyBytes = 1024

// recordID derives the storage key from the key material. Each part is length
// prefixed before hashing, so ("a","bc") and ("ab","c") never collide, and only
// the prefix (the function's name, chosen by the operator) is stored in clear.
func recordID(prefix, scope, key string) string {
	n := 3*8 + len(prefix) + len(scope) + len(key)
	var stack [256]byte
	buf := stack[:0]
	if n > len(stack) {
		buf = make([]byte, 0, n)
	}
	for _, part := range [...]string{prefix, scope, key} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(part)))
		buf = append(buf, part...)
	}
	sum := sha256.Sum256(buf)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	var b strings.Builder // one allocation for the whole id
	b.Grow(len(prefix) + 1 + len(hexSum))
	b.WriteString(prefix)
	b.WriteByte('#')
	b.Write(hexSum[:])
	return b.String()
}

// checkKey enforces the limits on a raw key.
func checkKey(key string) error {
	if len(key) > maxKeyBytes {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrInvalidKey, len(key), maxKeyBytes)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	return nil
}

// wholeInputKey is the default key: the SHA-256 of the whole input as JSON
// (encoding/json is deterministic: struct fields in order, map keys sorted), so
// a large event makes a short key.
func wholeInputKey(in any) (string, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// fingerprint hashes a payload chosen by a validation function. A []byte is
// hashed as given, a json.RawMessage is canonicalized first, anything else is
// marshaled to JSON (encoding/json sorts map keys, so this is deterministic).
func fingerprint(payload any) (string, error) {
	var b []byte
	var err error
	switch p := payload.(type) {
	case []byte:
		b = p
	case json.RawMessage:
		b, err = canonjson.Canonicalize(p)
	case string:
		b = []byte(p)
	default:
		b, err = json.Marshal(p)
	}
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// newLease returns a random lease token.
func newLease() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+ crashes instead)
	return hex.EncodeToString(b[:])
}

// downstreamKey derives the key handed to external APIs from a record ID: the
// same across retries, replays and takeovers, distinct per prefix and scope,
// and not reversible to the record ID.
func downstreamKey(id string) string {
	sum := sha256.Sum256([]byte("idemkit/downstream/v1\x00" + id))
	return hex.EncodeToString(sum[:16])
}
