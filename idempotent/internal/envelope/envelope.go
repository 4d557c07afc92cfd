package envelope

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The first byte of storage.Record.Data says how the rest is encoded. New tags may be
// added; an unknown tag is a corrupt record, never misread.
const (
	tagPlain      = 'p' // codec bytes as they are
	tagDeflate    = 'z' // codec bytes, DEFLATE-compressed
	tagNotStored  = 'n' // no response: it was too large or not serializable
	maxInflatedMB = 64  // bound on a decompressed response, against bombs
)

// NotStored is the Data of a record completed without its response (too
// large, or not serializable).
var NotStored = []byte{tagNotStored}

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// Encode wraps codec bytes for storage, compressing them when they are
// larger than threshold and compression helps.
func Encode(raw []byte, threshold int) []byte {
	if len(raw) > threshold && threshold >= 0 {
		var buf bytes.Buffer
		buf.Grow(len(raw)/2 + 16)
		buf.WriteByte(tagDeflate)
		w := flateWriters.Get().(*flate.Writer)
		w.Reset(&buf)
		_, _ = w.Write(raw) // writes to a bytes.Buffer do not fail
		_ = w.Close()
		flateWriters.Put(w)
		if buf.Len() < len(raw) {
			return buf.Bytes()
		}
	}
	out := make([]byte, 1+len(raw))
	out[0] = tagPlain
	copy(out[1:], raw)
	return out
}

// Decode returns the codec bytes held in data; stored reports whether the
// record carries a response at all. An error says why data does not decode;
// storage.Record.Response, the one caller, wraps it with
// storage.ErrCorruptRecord (this package cannot import storage, which
// imports it).
func Decode(data []byte) (raw []byte, stored bool, err error) {
	if len(data) == 0 {
		return nil, false, errors.New("completed record has no data")
	}
	switch data[0] {
	case tagPlain:
		return data[1:], true, nil
	case tagDeflate:
		r := flate.NewReader(bytes.NewReader(data[1:]))
		defer r.Close()
		raw, err := io.ReadAll(io.LimitReader(r, maxInflatedMB<<20+1))
		if err != nil {
			return nil, false, fmt.Errorf("inflate: %w", err)
		}
		if len(raw) > maxInflatedMB<<20 {
			return nil, false, fmt.Errorf("response inflates past %d MB", maxInflatedMB)
		}
		return raw, true, nil
	case tagNotStored:
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("unknown data encoding %q", data[0])
	}
}
