package idemkitcli_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/cmd/internal/idemkitcli"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// TestOperationsDocCommands checks the shell blocks of docs/operations.md
// that name this file: the install line has the module's path, and every
// idemkit command parses (exit status not 2) and reaches the store, which
// here answers that the docs' table does not exist.
func TestOperationsDocCommands(t *testing.T) {
	localddbtest.Require(t)
	raw, err := os.ReadFile("../../../docs/operations.md")
	require.NoError(t, err)
	var lines []string
	inBlock, checked := false, false
	for _, l := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(l, "```sh"):
			inBlock, checked = true, false
		case inBlock && strings.HasPrefix(l, "```"):
			inBlock = false
		case inBlock && strings.TrimSpace(l) == "# checked-by: cmd/internal/idemkitcli/docs_test.go":
			checked = true
		case inBlock && checked:
			lines = append(lines, l)
		}
	}
	// Join continuation lines.
	cmds := strings.Split(strings.ReplaceAll(strings.Join(lines, "\n"), "\\\n", " "), "\n")
	var installs, runs int
	for _, cmd := range cmds {
		words := strings.Fields(cmd)
		switch {
		case len(words) == 0:
		case words[0] == "go":
			installs++
			assert.Equal(t, []string{"go", "install", "github.com/idemkit/idemkit/cmd/idemkit@<version>"}, words)
		case words[0] == "idemkit":
			runs++
			r := run(t, time.Now(), words[1:]...)
			assert.NotEqual(t, idemkitcli.ExitUsage, r.code, "%s: %s", cmd, r.stderr)
			assert.Contains(t, r.stderr, "the table does not exist", cmd)
		default:
			t.Errorf("docs/operations.md: unexpected command %q", cmd)
		}
	}
	assert.Equal(t, 1, installs)
	assert.GreaterOrEqual(t, runs, 4)
}
