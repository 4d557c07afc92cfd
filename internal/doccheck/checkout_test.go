package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Until a release of idemkit is on the module proxy, `go mod tidy` cannot
// fetch it (the proxy answers 403): a new user points their module at a
// clone. README.md's quick start and docs/getting-started.md say how in one
// ```sh block, marked "# checked-by: internal/doccheck/checkout_test.go",
// whose commands name the clone /path/to/idemkit. compilePrograms follows
// those commands literally, in a fresh module outside the repository, and
// then vets and tests the documentation's programs there: the quick start's
// main.go with the guide's tests is the program a new user builds.

// checkoutPlaceholder is where the documented commands put the clone; the
// test puts this repository there.
const checkoutPlaceholder = "/path/to/idemkit"

// checkoutDocs are the files that show the checkout commands, with the
// section that holds them ("" for anywhere).
var checkoutDocs = []struct{ file, section string }{
	{"README.md", "Quick start"},
	{"docs/getting-started.md", "1. Wrap the handler"},
}

// checkoutBlock returns the lines of the one ```sh block of a file (in the
// section under "## <section>") marked for this test, without the marker.
func checkoutBlock(t *testing.T, file, section string) []string {
	t.Helper()
	blocks, prose := parseMarkdown(file, readDoc(t, file))
	from, to := sectionLines(prose, section)
	if from < 0 {
		t.Errorf("%s: no section \"## %s\"", file, section)
		return nil
	}
	var found []block
	for _, b := range blocks {
		if b.lang == "sh" && b.line >= from && b.line <= to && len(b.lines) > 0 &&
			strings.TrimSpace(b.lines[0]) == "# checked-by: internal/doccheck/checkout_test.go" {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Errorf("%s: want one ```sh block marked \"# checked-by: internal/doccheck/checkout_test.go\" in section %q (how to use idemkit from a clone), found %d",
			file, section, len(found))
		return nil
	}
	return found[0].lines[1:]
}

// sectionLines returns the 1-based line range of the "## <section>" section
// of a document's prose (the whole document for ""), or from = -1.
func sectionLines(prose []string, section string) (from, to int) {
	if section == "" {
		return 0, len(prose) + 1
	}
	from, to = -1, len(prose)+1
	for n, l := range prose {
		if !strings.HasPrefix(l, "## ") {
			continue
		}
		switch {
		case strings.TrimSpace(l[3:]) == section:
			from = n + 1
		case from >= 0 && to > len(prose):
			to = n + 1
		}
	}
	return from, to
}

// checkoutCommands returns the documented commands, the same in every file
// of checkoutDocs, each a shell command line.
func checkoutCommands(t *testing.T) []string {
	t.Helper()
	var first []string
	for i, d := range checkoutDocs {
		lines := checkoutBlock(t, d.file, d.section)
		if lines == nil {
			return nil
		}
		if i == 0 {
			first = lines
		} else if !slices.Equal(first, lines) {
			t.Errorf("%s and %s must show the same commands to use a clone:\n%s\n---\n%s",
				checkoutDocs[0].file, d.file, strings.Join(first, "\n"), strings.Join(lines, "\n"))
		}
	}
	cmds := commandLines(first)
	text := strings.Join(cmds, "\n")
	for _, want := range []string{checkoutPlaceholder, "go mod tidy", "install ./cmd/idemkit"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s: the commands to use a clone do not say %q:\n%s", checkoutDocs[0].file, want, text)
		}
	}
	return cmds
}

// TestCheckoutCommandsAreOne: the README and the guide show one set of
// commands (compilePrograms runs them).
func TestCheckoutCommandsAreOne(t *testing.T) {
	checkoutCommands(t)
}

// userModule is a new user's module in a temporary directory outside the
// repository, built with the machine's module cache and proxy, no
// workspace, and an `idemkit` installed into a GOBIN of its own.
type userModule struct {
	dir, bin string
	env      []string
	goCmd    string
}

// newUserModule runs `go mod init` in a fresh temporary directory.
func newUserModule(t *testing.T) *userModule {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	m := &userModule{dir: t.TempDir(), bin: t.TempDir(), goCmd: goCmd}
	m.env = append(os.Environ(),
		"GOWORK=off", // a user's module, on its own
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"),
		"GOBIN="+m.bin,
		"PATH="+m.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	m.run(t, goCmd, "mod", "init", "example.com/yourfunction")
	return m
}

// run runs a command in the module's directory and fails the test with its
// output if it fails.
func (m *userModule) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = m.dir, m.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a new module outside the repository (%s): %s %s: %v\n%s", m.dir, filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

var placeholderRE = regexp.MustCompile(regexp.QuoteMeta(checkoutPlaceholder) + `\b`)

// useCheckout runs the documented commands in the module, as a user pastes
// them into a shell, with this repository as the clone; then checks that
// go.mod points at it and that the idemkit command was installed and runs.
func (m *userModule) useCheckout(t *testing.T, cmds []string) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash not found: %v", err)
	}
	for _, c := range cmds {
		m.run(t, bash, "-euo", "pipefail", "-c", placeholderRE.ReplaceAllLiteralString(c, root))
	}
	gomod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "github.com/idemkit/idemkit => "+root) {
		t.Errorf("after the documented commands, go.mod does not replace idemkit with the clone:\n%s", gomod)
	}
	if _, err := os.Stat(filepath.Join(m.bin, "idemkit")); err != nil {
		t.Fatalf("the documented commands installed no idemkit command: %v", err)
	}
	// By its path: exec looks a bare name up in this process's PATH, not in m.env's.
	if out := m.run(t, filepath.Join(m.bin, "idemkit"), "id", "--prefix", "payments", "--key", "o-1"); !strings.HasPrefix(out, "payments#") {
		t.Errorf("the installed idemkit id printed %q, want a record id", out)
	}
}
