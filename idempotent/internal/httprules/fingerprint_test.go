package httprules

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"Application/JSON; charset=UTF-8":   true,
		"application/problem+json":          true,
		"application/merge-patch+json":      true,
		"application/vnd.api+json; v=1":     true,
		"application/json;;bad":             true,
		"":                                  false,
		"text/plain":                        false,
		"text/json":                         false,
		"application/jsonl":                 false,
		"application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x":   false,
		"text/x+json":                       false,
	} {
		assert.Equal(t, want, IsJSON(ct), ct)
	}
}
