package doccheck

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// infraReadme is the page of the sample stack (infra/, its own module).
const infraReadme = "infra/README.md"

// sampleFunction is one entry of the Makefile's FUNCTIONS: build/NAME/bootstrap
// is built from PACKAGE. infra's TestFunctionAssetsMatchMakefile holds the
// stack's functionAssets to the same names.
type sampleFunction struct{ name, pkg string }

// makeFunctions returns the Makefile's FUNCTIONS.
func makeFunctions(t *testing.T) []sampleFunction {
	t.Helper()
	mk := strings.ReplaceAll(readDoc(t, "Makefile"), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^FUNCTIONS\s*:=\s*(.*)$`).FindStringSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no FUNCTIONS := NAME:PACKAGE ...")
	}
	var fns []sampleFunction
	for _, pair := range strings.Fields(m[1]) {
		name, pkg, ok := strings.Cut(pair, ":")
		if !ok {
			t.Fatalf("Makefile: FUNCTIONS entry %q is not NAME:PACKAGE", pair)
		}
		fns = append(fns, sampleFunction{name, strings.TrimPrefix(pkg, "./")})
	}
	if len(fns) < 2 {
		t.Fatalf("Makefile: FUNCTIONS = %v", fns)
	}
	return fns
}

var (
	braceListRE = regexp.MustCompile(`build/\{([^}]*)\}/bootstrap`)
	countRE     = regexp.MustCompile(`(?i)\b(both|two|three|four|five|six|seven|eight)\s+(?:sample\s+)?(?:functions|binaries)\b`)
	cdkRunRE    = regexp.MustCompile(`\bcdk(?:local)?\s+(?:synth|deploy|bootstrap)\b`)
)

// TestInfraReadmeNamesEveryFunction: infra/README.md tells of every function
// the stack deploys, the ones `make build` builds: its introduction names each
// one's package, the assetsDir row and the paragraph on where the code comes
// from name each build/NAME/bootstrap, a list build/{...}/bootstrap holds them
// all, and no count of the functions ("both", "three functions") is wrong.
// And the page never runs the CDK app before the binaries exist: a ```sh block
// runs `cdk synth`, `deploy` or `bootstrap` only after `make build` (the make
// targets build first), and a command in the prose that does (`npx cdk ...`)
// sits in a paragraph that says `make build`: the app stops without them
// ("../build/orders/bootstrap is missing"), as on a fresh clone.
func TestInfraReadmeNamesEveryFunction(t *testing.T) {
	fns := makeFunctions(t)
	text := readDoc(t, infraReadme)
	blocks, prose := parseMarkdown(infraReadme, text)
	paragraphs, lines := proseParagraphs(prose)

	intro := paragraphs[0]
	for _, p := range paragraphs[1:] {
		if strings.HasPrefix(strings.TrimSpace(p), "|") || strings.HasPrefix(strings.TrimSpace(p), "#") {
			break
		}
		intro += "\n" + p
	}
	var names []string
	for _, fn := range fns {
		names = append(names, fn.name)
		pkg := strings.TrimSuffix(fn.pkg, "/cmd/bootstrap")
		if !strings.Contains(intro, "`"+pkg+"`") {
			t.Errorf("%s: the introduction does not name `%s`, the package of build/%s/bootstrap (Makefile FUNCTIONS)", infraReadme, pkg, fn.name)
		}
	}

	checkBinaries := func(what, p string) {
		t.Helper()
		if p == "" {
			t.Errorf("%s: no %s", infraReadme, what)
			return
		}
		for _, name := range names {
			if !strings.Contains(p, "`"+name+"/bootstrap`") && !strings.Contains(p, "`build/"+name+"/bootstrap`") {
				t.Errorf("%s: %s does not name %s/bootstrap (Makefile FUNCTIONS: %s)", infraReadme, what, name, strings.Join(names, " "))
			}
		}
	}
	var assetsRow, codeFrom string
	for _, l := range prose {
		if strings.HasPrefix(l, "| `assetsDir` |") {
			assetsRow = l
		}
	}
	for _, p := range paragraphs {
		if strings.Contains(p, "code comes from") {
			codeFrom = p
		}
	}
	checkBinaries("`assetsDir` row of the context keys", assetsRow)
	checkBinaries("paragraph on where the functions' code comes from", codeFrom)

	for _, m := range braceListRE.FindAllStringSubmatch(text, -1) {
		got := strings.Split(m[1], ",")
		if !slices.Equal(sortedCopy(got), sortedCopy(names)) {
			t.Errorf("%s: %s lists %v; make build builds %v", infraReadme, m[0], got, names)
		}
	}
	words := map[string]int{"both": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
	for _, m := range countRE.FindAllStringSubmatch(text, -1) {
		if words[strings.ToLower(m[1])] != len(fns) {
			t.Errorf("%s: %q, but the stack has %d functions (Makefile FUNCTIONS)", infraReadme, m[0], len(fns))
		}
	}

	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		built := false
		for _, c := range commandLines(b.lines) {
			if regexp.MustCompile(`^make\b.*\bbuild\b`).MatchString(c) {
				built = true
			}
			if cdkRunRE.MatchString(c) && !built {
				t.Errorf("%s: %q runs the CDK app, which stops without the binaries: run `make build` first in the block, or use the make target (make synth, make deploy)", b, c)
			}
		}
	}
	for n, p := range paragraphs {
		for _, span := range codeRE.FindAllString(p, -1) {
			if c := strings.Trim(span, "`"); strings.HasPrefix(c, "npx ") || strings.HasPrefix(c, "cd infra") {
				if cdkRunRE.MatchString(c) && !strings.Contains(p, "`make build`") {
					t.Errorf("%s:%d: %s runs the CDK app, which stops without the binaries: say `make build` first", infraReadme, lines[n], span)
				}
			}
		}
	}
}

// proseParagraphs joins prose lines into paragraphs (runs of non-blank
// lines) and returns each with the 1-based line it starts on.
func proseParagraphs(prose []string) (paragraphs []string, lines []int) {
	var cur []string
	for n, l := range append(prose, "") {
		if strings.TrimSpace(l) == "" {
			if len(cur) > 0 {
				paragraphs = append(paragraphs, strings.Join(cur, "\n"))
			}
			cur = nil
			continue
		}
		if len(cur) == 0 {
			lines = append(lines, n+1)
		}
		cur = append(cur, l)
	}
	return paragraphs, lines
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
