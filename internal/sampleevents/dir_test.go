package sampleevents

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The walk up from the working directory, for binaries built with
// -trimpath, stops at this module's go.mod only.
func TestIsModuleRoot(t *testing.T) {
	t.Parallel()
	assert.True(t, isModuleRoot(filepath.Join("..", "..")))
	assert.False(t, isModuleRoot("."))
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n\ngo 1.24\n"), 0o644))
	assert.False(t, isModuleRoot(other))
	quoted := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(quoted, "go.mod"), []byte("// a comment\nmodule \"github.com/idemkit/idemkit\"\n"), 0o644))
	assert.True(t, isModuleRoot(quoted))
}
