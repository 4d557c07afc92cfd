package doccheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/internal/localddb"
)

// TestCodeBlocks checks every fenced code block of the documentation by its
// language; see the package comment. Complete Go files are collected and
// compiled together at the end, with one go command.
func TestCodeBlocks(t *testing.T) {
	targets := makeTargets(t)
	var programs, inModule []block
	for _, file := range docFiles(t) {
		blocks, _ := parseMarkdown(file, readDoc(t, file))
		for _, b := range blocks {
			switch b.lang {
			case "go":
				if isCompleteFile(b) {
					programs = append(programs, b)
				} else {
					checkFragment(t, b)
				}
			case "sh", "bash", "shell":
				if isInYourModule(b) {
					inModule = append(inModule, b)
				}
				if !checkedElsewhere(t, b) {
					checkCommands(t, b, targets)
				}
			case "yaml", "yml":
				if !checkedElsewhere(t, b) {
					t.Errorf("%s: a YAML block needs a first line \"# checked-by: <test file>\" naming the test that checks it", b)
				}
			case "json":
				if !json.Valid([]byte(b.text())) {
					t.Errorf("%s: not valid JSON", b)
				}
			case "logsinsights":
				checkLogsInsights(t, b)
			case "sql":
				checkSQL(t, b)
			case "text":
			case "":
				t.Errorf("%s: a code block needs a language (text for output and other non-code)", b)
			default:
				t.Errorf("%s: no check for language %q: use go, sh, yaml, json, logsinsights, sql or text", b, b.lang)
			}
		}
	}
	if !slices.ContainsFunc(inModule, func(b block) bool { return b.file == "docs/getting-started.md" }) {
		t.Errorf("docs/getting-started.md: no ```sh block headed %q: the command that runs the reader's tests against DynamoDB Local, from their module", yourModuleMarker)
	}
	compilePrograms(t, programs, inModule)
}

// --- Go ----------------------------------------------------------------------------------------------------

var markerRE = regexp.MustCompile(`^//\s*example:\s*(\S+)(?:\s+(\S+))?\s*$`)

// isCompleteFile reports whether a Go block is a whole file: its first line
// that is neither blank nor a comment is a package clause.
func isCompleteFile(b block) bool {
	for _, l := range b.lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		return strings.HasPrefix(l, "package ")
	}
	return false
}

// checkFragment checks a Go fragment against the code it is taken from: its
// first line is "// example: <file> [<Func>]", and its other lines that are
// not blank (and not "..." or "// ...", which elide) appear in that order,
// white space aside, in the function (or, without one, the file).
var sqlFromRE = regexp.MustCompile(`^--\s*from:\s*(\S+)\s*$`)

// checkSQL checks an SQL block: it starts with "-- from: <file>", a file of
// the repository (a schema the code embeds), and its lines appear in that
// file in this order, as a Go fragment's in its function.
func checkSQL(t *testing.T, b block) {
	t.Helper()
	if len(b.lines) < 2 {
		t.Errorf("%s: an SQL block needs a first line \"-- from: <file>\" and the lines quoted from it", b)
		return
	}
	m := sqlFromRE.FindStringSubmatch(strings.TrimSpace(b.lines[0]))
	if m == nil {
		t.Errorf("%s: an SQL block must start with \"-- from: <file>\" naming the repository file it quotes", b)
		return
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, m[1]))
	if err != nil {
		t.Errorf("%s: %v", b, err)
		return
	}
	have := normalizedLines(strings.Split(string(src), "\n"))
	want := normalizedLines(b.lines[1:])
	i := 0
	for _, l := range have {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("%s: line %q (and what follows) is not in %s, in this order; update the documentation", b, want[i], m[1])
	}
}

func checkFragment(t *testing.T, b block) {
	t.Helper()
	if len(b.lines) == 0 {
		t.Errorf("%s: empty block", b)
		return
	}
	m := markerRE.FindStringSubmatch(strings.TrimSpace(b.lines[0]))
	if m == nil {
		t.Errorf("%s: a Go fragment must start with \"// example: <file> <Func>\" naming the code it is taken from (or be a complete file)", b)
		return
	}
	file, fn := m[1], m[2]
	src, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Errorf("%s: %v", b, err)
		return
	}
	text := string(src)
	if fn != "" {
		if text, err = funcSource(file, src, fn); err != nil {
			t.Errorf("%s: %v", b, err)
			return
		}
	}
	have := normalizedLines(strings.Split(text, "\n"))
	want := normalizedLines(b.lines[1:])
	if len(want) == 0 {
		t.Errorf("%s: a fragment with nothing but its marker", b)
		return
	}
	i := 0
	for _, l := range have {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("%s: line %q (and what follows) is not in %s %s, in this order; update the documentation or the example", b, want[i], file, fn)
	}
	if err := fragmentParses(b.lines[1:]); err != nil {
		t.Errorf("%s: not whole Go: %v. Show every call and block to its end (elide inside them with \"...\" lines), "+
			"or link %s instead of quoting a part that stops in the middle", b, err, file)
	}
}

// fragmentParses reports whether a fragment, its elision lines dropped, is
// whole Go: statements (as in a function body), declarations, the arguments
// of a call, or declarations followed by statements with an elision between
// them. So an excerpt never stops in the middle of a call or a block, and
// its brackets balance: what a reader copies is code, and "..." elides only
// whole lines inside it. It returns the statements' parse error.
func fragmentParses(lines []string) error {
	var kept []string
	var elisions []int // indexes into kept where an elision stood
	for _, l := range lines {
		switch strings.TrimSpace(l) {
		case "...", "// ...":
			elisions = append(elisions, len(kept))
			continue
		}
		kept = append(kept, l)
	}
	parses := func(src string) error {
		_, err := parser.ParseFile(token.NewFileSet(), "fragment.go", src, parser.SkipObjectResolution)
		return err
	}
	src := strings.Join(kept, "\n")
	stmtErr := parses("package p\nfunc _() {\n" + src + "\n}\n")
	if stmtErr == nil || parses("package p\n"+src+"\n") == nil || parses("package p\nvar _ = f(\n"+src+"\n)\n") == nil {
		return nil
	}
	for _, k := range elisions {
		decls, stmts := strings.Join(kept[:k], "\n"), strings.Join(kept[k:], "\n")
		if parses("package p\n"+decls+"\nfunc _() {\n"+stmts+"\n}\n") == nil {
			return nil
		}
	}
	return stmtErr
}

// normalizedLines trims white space and drops blank lines and elisions.
func normalizedLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" || l == "..." || l == "// ..." {
			continue
		}
		out = append(out, l)
	}
	return out
}

// funcSource returns the source text of the function (or method) fn.
func funcSource(file string, src []byte, fn string) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			return string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset]), nil
		}
	}
	return "", fmt.Errorf("%s has no function %s", file, fn)
}

var fileNameRE = regexp.MustCompile(`^//\s*([A-Za-z0-9_.-]+\.go)\s*$`)

// compilePrograms writes the complete Go files to packages of a new
// user's module outside the repository, follows the documented commands to
// use idemkit from a clone there (checkout_test.go: `go mod edit -replace`,
// `go mod tidy`, installing the idemkit command), then vets them all with
// one go command (vet type-checks test files too) and runs the tests among
// them. So the documentation's programs build as a reader's own module
// builds them, not only inside this one.
//
// A block is a package of its own, unless its first line names its file
// ("// main.go", "// main_test.go"): the named blocks of one Markdown file
// with the same package clause form one package, as a guide builds a
// program and its test step by step.
func compilePrograms(t *testing.T, programs, inModule []block) {
	t.Helper()
	if len(programs) == 0 {
		t.Fatal("no complete Go file in the documentation: the README's quick start should be one")
	}
	cmds := checkoutCommands(t)
	if cmds == nil {
		return
	}
	m := newUserModule(t)

	pkgOf := map[string]string{} // file + package clause -> package path
	var all, tests []string
	where := map[string][]block{}
	for _, b := range programs {
		name, group := "", ""
		if m := fileNameRE.FindStringSubmatch(strings.TrimSpace(b.lines[0])); m != nil {
			name, group = m[1], b.file+"\x00"+packageClause(b)
		}
		pkg, ok := pkgOf[group]
		if !ok || group == "" {
			pkg = "./b" + strconv.Itoa(len(all)+1)
			all = append(all, pkg)
			if group != "" {
				pkgOf[group] = pkg
			}
		}
		if name == "" {
			name = "main.go"
			if strings.Contains(b.text(), `"testing"`) {
				name = "doc_test.go"
			}
		}
		if strings.HasSuffix(name, "_test.go") && !slices.Contains(tests, pkg) {
			tests = append(tests, pkg)
		}
		path := filepath.Join(m.dir, pkg, name)
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a second %s in the same package", b, name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.text()), 0o644); err != nil {
			t.Fatal(err)
		}
		where[strings.TrimPrefix(pkg, "./")] = append(where[strings.TrimPrefix(pkg, "./")], b)
	}
	m.useCheckout(t, cmds)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(m.goCmd, args...)
		cmd.Dir, cmd.Env = m.dir, m.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			// Say which Markdown blocks a scratch package came from.
			msg := string(out)
			for pkg, bs := range where {
				var names []string
				for _, b := range bs {
					names = append(names, b.String())
				}
				msg = strings.ReplaceAll(msg, pkg, pkg+" ["+strings.Join(names, ", ")+"]")
			}
			t.Errorf("go %s (in a new module outside the repository): %v\n%s", args[0], err, msg)
		}
	}
	run(append([]string{"vet"}, all...)...)
	if len(tests) > 0 {
		run(append([]string{"test", "-count=1"}, tests...)...)
	}
	runInYourModule(t, m, inModule)
}

// yourModuleMarker heads a ```sh block whose commands the reader runs in
// their own module's directory, not in the clone.
const yourModuleMarker = "# in your module"

func isInYourModule(b block) bool {
	return len(b.lines) > 0 && strings.TrimSpace(b.lines[0]) == yourModuleMarker
}

// runInYourModule runs the commands of the blocks headed "# in your module"
// in the new user's module, after the checkout commands and with the
// documentation's programs in it, as the reader pastes them (the clone's
// path, /path/to/idemkit, is this repository). Your module has no scripts/:
// a script of the repository must be named by its path in the clone, which
// checkCommands requires of these blocks. The commands may need DynamoDB
// (scripts/with-dynamodb.sh): without AWS_ENDPOINT_URL_DYNAMODB they are not
// run, as tests on DynamoDB Local skip, unless IDEMKIT_REQUIRE_DYNAMODB=1.
func runInYourModule(t *testing.T, m *userModule, blocks []block) {
	t.Helper()
	if len(blocks) == 0 {
		return
	}
	if os.Getenv(localddb.EnvEndpoint) == "" && os.Getenv(localddb.EnvRequire) != "1" {
		t.Logf("%s is not set: the %d blocks headed %q are not run (run under scripts/with-dynamodb.sh)", localddb.EnvEndpoint, len(blocks), yourModuleMarker)
		return
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		for _, c := range commandLines(b.lines) {
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", placeholderRE.ReplaceAllLiteralString(c, root))
			cmd.Dir, cmd.Env = m.dir, m.env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: %q, run in a new module outside the repository: %v\n%s", b, c, err, out)
				continue
			}
			t.Logf("%s: %q, run in a new module outside the repository:\n%s", b, c, out)
		}
	}
}

// packageClause returns the name in a complete file's package clause.
func packageClause(b block) string {
	for _, l := range b.lines {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "package "); ok {
			return strings.TrimSpace(name)
		}
	}
	return ""
}

// --- shell ---------------------------------------------------------------------------------------------------

var checkedByRE = regexp.MustCompile(`^#\s*checked-by:\s*(\S+)\s*$`)

// checkedElsewhere reports whether a block's first line hands it to another
// test: "# checked-by: infra/docs_test.go". That test file must exist and
// name the Markdown file.
func checkedElsewhere(t *testing.T, b block) bool {
	t.Helper()
	if len(b.lines) == 0 {
		return false
	}
	m := checkedByRE.FindStringSubmatch(strings.TrimSpace(b.lines[0]))
	if m == nil {
		return false
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, m[1]))
	switch {
	case err != nil:
		t.Errorf("%s: checked-by: %v", b, err)
	case !strings.HasSuffix(m[1], "_test.go"):
		t.Errorf("%s: checked-by %s: not a test file", b, m[1])
	case !strings.Contains(string(src), filepath.Base(b.file)):
		t.Errorf("%s: checked-by %s, which does not mention %s", b, m[1], filepath.Base(b.file))
	}
	return true
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)

// checkCommands: each command of a shell block is `make <target>...` with
// targets the Makefile has, or runs a script of the repository.
func checkCommands(t *testing.T, b block, targets map[string]bool) {
	t.Helper()
	for _, cmdline := range commandLines(b.lines) {
		for _, part := range regexp.MustCompile(`&&|\|\||;`).Split(cmdline, -1) {
			words := strings.Fields(part)
			for len(words) > 0 && assignRE.MatchString(words[0]) {
				words = words[1:] // VAR=value before the command
			}
			if len(words) == 0 {
				continue
			}
			switch cmd := words[0]; {
			case cmd == "make":
				n := 0
				for _, w := range words[1:] {
					if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
						continue
					}
					n++
					if !targets[w] {
						t.Errorf("%s: make %s: the Makefile has no target %s", b, w, w)
					}
				}
				if n == 0 {
					t.Errorf("%s: name the target: %q", b, part)
				}
			case strings.Contains(cmd, "/"):
				inClone, ok := strings.CutPrefix(cmd, checkoutPlaceholder+"/")
				switch {
				case ok:
					cmd = inClone // a script of the clone, by its path there
				case isInYourModule(b):
					t.Errorf("%s: %s: the block runs in the reader's module, where there is no %s: name it by its path in the clone, %s/%s", b, cmd, cmd, checkoutPlaceholder, cmd)
				}
				info, err := os.Stat(filepath.Join(repoRoot, cmd))
				if err != nil {
					t.Errorf("%s: %s: %v", b, cmd, err)
				} else if info.Mode()&0o111 == 0 {
					t.Errorf("%s: %s is not executable", b, cmd)
				}
			default:
				t.Errorf("%s: %q is neither `make <target>` nor a script of the repository; use a Makefile target, or hand the block to a test with \"# checked-by:\"", b, strings.TrimSpace(part))
			}
		}
	}
}

// commandLines joins continuation lines and drops comments and blank lines.
func commandLines(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		cur += l
		if strings.TrimSpace(cur) != "" {
			out = append(out, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return out
}

var ruleRE = regexp.MustCompile(`^([^\s:#=][^:=]*?)\s*::?(?:[^=]|$)`)

// makeTargets returns the targets of the repository's Makefile.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	targets := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "\t") {
			continue // a recipe
		}
		if m := ruleRE.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], ".") {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"demo", "test"} {
		if !targets[must] {
			t.Fatalf("the Makefile parse found no %q target: %v", must, targets)
		}
	}
	return targets
}

func TestMakeTargetsParse(t *testing.T) {
	got := makeTargets(t)
	for _, name := range []string{"demo", "test", "vet", "build", "deploy", "deploy-local", "local-up", "test-infra"} {
		if !got[name] {
			t.Errorf("target %s not found", name)
		}
	}
	for name := range got {
		if strings.ContainsAny(name, "$:=") {
			t.Errorf("not a target: %q", name)
		}
	}
}

// --- CloudWatch Logs Insights ---------------------------------------------------------------------------------

// logAttributes are the attributes idemkit's log lines carry (see
// docs/operations.md), and the fields CloudWatch adds. TestLogAttributesExist
// keeps the first kind honest.
var logAttributes = []string{
	// idempotent's outcome line, and the adapters' lines
	"msg", "level", "time", "outcome", "record_id", "handler_ran", "took_over", "resumed", "duration", "error",
	"message_id", "panic", "stack", "method",
}

var insightsFields = []string{"@timestamp", "@message", "@logStream", "@log", "@requestId"}

// insightsWords are the query language's commands, keywords and functions
// the documentation uses.
var insightsWords = []string{
	"fields", "filter", "stats", "sort", "limit", "display", "parse", "dedup",
	"by", "as", "asc", "desc", "and", "or", "not", "in", "like",
	"count", "count_distinct", "sum", "avg", "min", "max", "pct", "bin", "ispresent", "latest", "earliest",
}

var (
	stringLitRE = regexp.MustCompile(`"[^"]*"|'[^']*'|/[^/]*/`)
	identRE     = regexp.MustCompile(`(?:^|[^A-Za-z0-9_@.])([@A-Za-z_][A-Za-z0-9_@.]*)`)
	aliasRE     = regexp.MustCompile(`\bas\s+([A-Za-z_][A-Za-z0-9_]*)|\(\?<([A-Za-z_][A-Za-z0-9_]*)>`)
)

// checkLogsInsights: a query names only known fields and keywords (and the
// fields it defines itself), and its string literals are outcomes, outcome
// messages or levels. Regular expressions (/.../) are not checked.
func checkLogsInsights(t *testing.T, b block) {
	t.Helper()
	outcomes := outcomeNames()
	text := b.text()
	for _, lit := range stringLitRE.FindAllString(text, -1) {
		if strings.HasPrefix(lit, "/") {
			continue // a regular expression
		}
		s := lit[1 : len(lit)-1]
		ok := slices.Contains(outcomes, s) || slices.Contains([]string{"DEBUG", "INFO", "WARN", "ERROR"}, s)
		if rest, found := strings.CutPrefix(s, "idempotent: "); found && slices.Contains(outcomes, rest) {
			ok = true
		}
		if !ok {
			t.Errorf("%s: string %s is not an outcome (%s), \"idempotent: <outcome>\" or a level", b, lit, strings.Join(outcomes, ", "))
		}
	}
	known := map[string]bool{}
	for _, w := range slices.Concat(logAttributes, insightsFields, insightsWords) {
		known[w] = true
	}
	for _, m := range aliasRE.FindAllStringSubmatch(text, -1) {
		known[m[1]+m[2]] = true // "as name", or a parse pattern's (?<name>...)
	}
	for _, line := range b.lines {
		line = stringLitRE.ReplaceAllString(line, " ")
		for _, m := range identRE.FindAllStringSubmatch(line, -1) {
			if w := m[1]; !known[w] {
				t.Errorf("%s: %q is not a log attribute, a CloudWatch field or a query keyword this check knows", b, w)
			}
		}
	}
}

// outcomeNames lists the names of idempotent's outcomes.
func outcomeNames() []string {
	var names []string
	for o := idempotent.Outcome(1); o.String() != "unknown"; o++ {
		names = append(names, o.String())
	}
	return names
}

// TestLogAttributesExist: every attribute logAttributes lists is written by
// the code (a quoted name in a log call), so the queries stay true.
func TestLogAttributesExist(t *testing.T) {
	var src strings.Builder
	for _, dir := range []string{"idempotent", "idempotent/apigateway", "idempotent/nethttp", "idempotent/sqsbatch"} {
		files, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(raw)
		}
	}
	for _, a := range logAttributes {
		switch a {
		case "msg", "level", "time":
			continue // slog's own
		}
		if !strings.Contains(src.String(), strconv.Quote(a)) {
			t.Errorf("log attribute %q is not written by the code any more: update docs/operations.md and this list", a)
		}
	}
	if len(outcomeNames()) < 10 {
		t.Errorf("outcomes: %v", outcomeNames())
	}
}
