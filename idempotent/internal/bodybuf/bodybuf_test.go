package bodybuf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuffer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []any // string or []byte
		want   string
	}{
		{"nothing", nil, ""},
		{"one string", []any{"hello"}, "hello"},
		{"empty strings", []any{"", "", ""}, ""},
		{"strings", []any{"he", "llo", " world"}, "hello world"},
		{"empty then string", []any{"", "x"}, "x"},
		{"bytes", []any{[]byte("ab"), []byte("cd")}, "abcd"},
		{"string then bytes", []any{"ab", []byte("cd"), "ef"}, "abcdef"},
		{"bytes then string", []any{[]byte("ab"), "cd"}, "abcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Buffer
			for _, w := range tc.writes {
				var n int
				var err error
				switch w := w.(type) {
				case string:
					n, err = b.WriteString(w)
					assert.Equal(t, len(w), n)
				case []byte:
					n, err = b.Write(w)
					assert.Equal(t, len(w), n)
				}
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.want, b.String())
			assert.Equal(t, len(tc.want), b.Len())
			b.Reset()
			assert.Equal(t, "", b.String())
			assert.Zero(t, b.Len())
		})
	}
}

// A body written as bytes is copied: the caller may reuse its slice.
func TestBufferCopiesBytes(t *testing.T) {
	var b Buffer
	p := []byte("abc")
	_, _ = b.Write(p)
	p[0] = 'x'
	assert.Equal(t, "abc", b.String())
}

// A body written in one string is that string: no allocation.
func TestBufferOneStringAllocatesNothing(t *testing.T) {
	s := string(make([]byte, 256))
	allocs := testing.AllocsPerRun(100, func() {
		var b Buffer
		_, _ = b.WriteString(s)
		_ = b.String()
	})
	assert.Zero(t, allocs)
}
