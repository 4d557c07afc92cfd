package nethttp

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBase64String: the chunked encoding is EncodeToString's at every length
// around the chunk size and its multiples.
func TestBase64String(t *testing.T) {
	t.Parallel()
	src := strings.Repeat("\xff\x00\x80binary\xfe", 400)
	for n := range 2400 {
		s := src[:n]
		if got, want := base64String(s), base64.StdEncoding.EncodeToString([]byte(s)); got != want {
			assert.Equal(t, want, got, "length %d", n)
			return
		}
	}
}
