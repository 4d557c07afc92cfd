package bodybuf

import "strings"

// Buffer accumulates a body. The zero value is empty and ready to use.
type Buffer struct {
	one  string          // the body, while it was written in one string
	more strings.Builder // the body, once it was written in more than one piece or as bytes
}

// WriteString appends s. It never fails.
func (b *Buffer) WriteString(s string) (int, error) {
	if b.one == "" && b.more.Len() == 0 {
		b.one = s
		return len(s), nil
	}
	b.spill()
	return b.more.WriteString(s)
}

// Write appends p (copied: the caller may reuse it). It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.spill()
	return b.more.Write(p)
}

// spill moves a body held as one string into the builder, before more is
// appended to it.
func (b *Buffer) spill() {
	if b.one != "" {
		b.more.Grow(2 * len(b.one))
		b.more.WriteString(b.one)
		b.one = ""
	}
}

// Len is the body's length.
func (b *Buffer) Len() int { return len(b.one) + b.more.Len() }

// String returns the body, without a copy.
func (b *Buffer) String() string {
	if b.one != "" {
		return b.one
	}
	return b.more.String()
}

// Reset empties the buffer.
func (b *Buffer) Reset() {
	b.one = ""
	b.more.Reset()
}
