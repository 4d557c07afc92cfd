package doccheck

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestQuickStartIsOneProgram: the README's quick start and
// docs/getting-started.md show one main.go, line for line. TestCodeBlocks
// compiles and runs the guide's tests (main_test.go, store_test.go, ...) with
// the guide's main.go, so they compile against the README's program too: a
// reader who takes the one and then the other never meets an undefined name.
// To change the program, change both blocks.
func TestQuickStartIsOneProgram(t *testing.T) {
	readme := namedGoBlock(t, "README.md", "Quick start", "main.go")
	guide := namedGoBlock(t, "docs/getting-started.md", "", "main.go")
	if readme == nil || guide == nil {
		return
	}
	for i := range max(len(readme.lines), len(guide.lines)) {
		a, b := lineAt(readme.lines, i), lineAt(guide.lines, i)
		if a != b {
			t.Errorf("%s and %s must be the same main.go, but differ at its line %d:\n\t%s: %q\n\t%s: %q",
				readme, guide, i+1, readme.file, a, guide.file, b)
			return
		}
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of block)"
}

// namedGoBlock returns the one complete Go block of a Markdown file whose
// first line names the file ("// main.go"), within the section under the
// "## <section>" heading when section is not empty.
func namedGoBlock(t *testing.T, file, section, name string) *block {
	t.Helper()
	blocks, prose := parseMarkdown(file, readDoc(t, file))
	from, to := 0, len(prose)+1 // line numbers, 1-based
	if section != "" {
		from = -1
		for n, l := range prose {
			if strings.HasPrefix(l, "## ") {
				switch {
				case strings.TrimSpace(l[3:]) == section:
					from = n + 1
				case from >= 0 && to > len(prose):
					to = n + 1
				}
			}
		}
		if from < 0 {
			t.Errorf("%s: no section \"## %s\"", file, section)
			return nil
		}
	}
	var found []block
	for _, b := range blocks {
		if b.lang != "go" || b.line < from || b.line > to || len(b.lines) == 0 || !isCompleteFile(b) {
			continue
		}
		if m := fileNameRE.FindStringSubmatch(strings.TrimSpace(b.lines[0])); m != nil && m[1] == name {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Errorf("%s: want one complete ```go block headed \"// %s\" (in section %q), found %d", file, name, section, len(found))
		return nil
	}
	return &found[0]
}

// TestGettingStartedListsOutcomes: docs/getting-started.md names every
// idempotent.Outcome constant, since `go doc` shows only the first of them.
func TestGettingStartedListsOutcomes(t *testing.T) {
	const guide = "docs/getting-started.md"
	text := readDoc(t, guide)
	names := outcomeConstants(t)
	if len(names) != len(outcomeNames()) {
		t.Fatalf("found the constants %v in idempotent, but %d outcomes", names, len(outcomeNames()))
	}
	for _, name := range names {
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(text) {
			t.Errorf("%s does not name idempotent.%s: list every outcome where it tells a replay from a first run", guide, name)
		}
	}
}

// outcomeConstants returns the names of the constants of type
// idempotent.Outcome, as go/doc groups them under their type.
func outcomeConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "idempotent", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/idemkit/idemkit/idempotent")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, typ := range pkg.Types {
		if typ.Name != "Outcome" {
			continue
		}
		for _, c := range typ.Consts {
			names = append(names, c.Names...)
		}
	}
	return names
}
