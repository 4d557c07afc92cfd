package nethttp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHeaderSnapshot: a snapshot keeps a header's names and values as they
// were (single values, several, an empty list, a nil one), sees every later
// change, and puts them back as they were.
func TestHeaderSnapshot(t *testing.T) {
	t.Parallel()
	build := func() http.Header {
		return http.Header{"A": {"1"}, "Multi": {"x", "y"}, "Empty": {}, "Nil": nil}
	}
	for _, tt := range []struct {
		name   string
		change func(h http.Header)
	}{
		{"none", func(http.Header) {}},
		{"a single value changed in place", func(h http.Header) { h["A"][0] = "2" }},
		{"a value added", func(h http.Header) { h.Add("A", "2") }},
		{"one of several changed in place", func(h http.Header) { h["Multi"][1] = "z" }},
		{"an empty list made nil", func(h http.Header) { h["Empty"] = nil }},
		{"a nil list made empty", func(h http.Header) { h["Nil"] = []string{} }},
		{"a header deleted", func(h http.Header) { h.Del("Multi") }},
		{"a header added", func(h http.Header) { h.Set("B", "1") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := build()
			s := snapshotOf(h)
			assert.True(t, s.matches(h))
			tt.change(h)
			assert.Equal(t, tt.name == "none", s.matches(h), "the change is seen")
			s.restore(h)
			assert.Equal(t, build(), h)
			assert.NotNil(t, h["Empty"])
			assert.Nil(t, h["Nil"])
			assert.True(t, s.holds("Multi", []string{"x", "y"}))
			assert.False(t, s.holds("A", []string{"2"}))
		})
	}
}

// TestHeaderSnapshotEmptyList: an empty list stays empty, not nil, when
// no header has several values either.
func TestHeaderSnapshotEmptyList(t *testing.T) {
	t.Parallel()
	h := http.Header{"A": {"1"}, "Empty": {}}
	s := snapshotOf(h)
	assert.True(t, s.matches(h))
	h["Empty"] = nil
	assert.False(t, s.matches(h))
	s.restore(h)
	assert.NotNil(t, h["Empty"])
	assert.Empty(t, h["Empty"])
}
