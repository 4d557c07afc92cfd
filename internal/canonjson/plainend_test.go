package canonjson

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlainEnd checks plainEnd, four bytes a loop, against a loop a byte:
// every byte value at every position of strings of every length to 12,
// from every start, so the stop falls in each lane of the loop and in the
// tail after it.
func TestPlainEnd(t *testing.T) {
	t.Parallel()
	naive := func(data []byte, i int) int {
		for i < len(data) && verbatim[data[i]] {
			i++
		}
		return i
	}
	for n := 0; n <= 12; n++ {
		for at := 0; at < max(n, 1); at++ {
			for c := range 256 {
				data := bytes.Repeat([]byte("a"), n)
				if at < n {
					data[at] = byte(c)
				}
				for i := 0; i <= n; i++ {
					require.Equal(t, naive(data, i), plainEnd(data, i), "%q from %d", data, i)
				}
			}
		}
	}
}
