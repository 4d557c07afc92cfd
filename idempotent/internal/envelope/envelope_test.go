package envelope

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	long := []byte(strings.Repeat(`{"id":"x"}`, 100))
	tests := []struct {
		name      string
		raw       []byte
		threshold int
		wantTag   byte
	}{
		{"small stays plain", []byte(`{"a":1}`), 64, tagPlain},
		{"large compresses", long, 64, tagDeflate},
		{"negative threshold never compresses", long, -1, tagPlain},
		{"incompressible stays plain", []byte("ab"), 0, tagPlain},
		{"empty response", []byte{}, 64, tagPlain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := Encode(tt.raw, tt.threshold)
			assert.Equal(t, tt.wantTag, data[0])
			raw, stored, err := Decode(data)
			require.NoError(t, err)
			assert.True(t, stored)
			assert.True(t, bytes.Equal(tt.raw, raw), "decoded %q", raw)
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	raw, stored, err := Decode(NotStored)
	require.NoError(t, err)
	assert.False(t, stored)
	assert.Nil(t, raw)

	for name, data := range map[string][]byte{
		"empty":          nil,
		"unknown tag":    []byte("x{}"),
		"broken deflate": append([]byte{tagDeflate}, 0xff, 0xfe, 0xfd),
	} {
		_, _, err := Decode(data)
		assert.Error(t, err, name)
	}
}
