package doccheck

import (
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// module is the root module's path.
const module = "github.com/idemkit/idemkit"

// skipDir reports whether a directory holds no package of ours: tooling,
// build output, fixtures, npm packages (aws-cdk ships Go templates), and the
// scratch packages codeblocks_test.go writes.
func skipDir(name string) bool {
	switch name {
	case "node_modules", "testdata", "cdk.out", "build", "vendor":
		return true
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// sourcePackage is one directory's package, parsed with comments.
type sourcePackage struct {
	dir   string // relative to the repository root, slash-separated
	name  string
	files []*ast.File
	names []string // file names, parallel to files
	fset  *token.FileSet
}

// sourcePackages parses the non-test Go files of every package in the
// repository (both modules), honouring build constraints.
func sourcePackages(t *testing.T) []sourcePackage {
	t.Helper()
	var pkgs []sourcePackage
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != repoRoot && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			t.Errorf("%s: %v", path, err)
			return nil
		}
		rel, _ := filepath.Rel(repoRoot, path)
		p := sourcePackage{dir: filepath.ToSlash(rel), name: bp.Name, fset: token.NewFileSet()}
		for _, name := range bp.GoFiles {
			f, err := parser.ParseFile(p.fset, filepath.Join(path, name), nil, parser.ParseComments)
			if err != nil {
				t.Errorf("%v", err)
				return nil
			}
			p.files = append(p.files, f)
			p.names = append(p.names, name)
		}
		if len(p.files) > 0 {
			pkgs = append(pkgs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s: is the walk broken?", len(pkgs), repoRoot)
	}
	return pkgs
}

// TestPackageComments: every package opens with an overview, as pkg.go.dev
// shows it first. A library's is in doc.go and starts "Package x "; a
// command's may sit in its main file and starts "Command x ".
func TestPackageComments(t *testing.T) {
	for _, p := range sourcePackages(t) {
		var text, in string
		for i, f := range p.files {
			if f.Doc == nil {
				continue
			}
			if text != "" {
				t.Errorf("%s/%s: a second package comment (the first is in %s)", p.dir, p.names[i], in)
				continue
			}
			text, in = f.Doc.Text(), p.names[i]
		}
		switch {
		case text == "":
			t.Errorf("%s: package %s has no package comment", p.dir, p.name)
		case p.name == "main":
			if !strings.HasPrefix(text, "Command ") {
				t.Errorf("%s/%s: a command's comment should start with \"Command <name> \": %q", p.dir, in, firstLine(text))
			}
		case in != "doc.go":
			t.Errorf("%s: the package comment of %s is in %s; keep it in doc.go", p.dir, p.name, in)
		case !strings.HasPrefix(text, "Package "+p.name+" "):
			t.Errorf("%s/doc.go: the package comment should start with \"Package %s \": %q", p.dir, p.name, firstLine(text))
		}
	}
}

// TestExportedIdentifiersDocumented: every exported name of a library
// package has a doc comment: functions, types, methods, constants and
// variables (a documented group covers its members); in the library
// (idempotent/...), the exported fields of exported structs too. Interface
// methods are covered by their interface's comment. Commands are skipped:
// pkg.go.dev shows only their package comment.
func TestExportedIdentifiersDocumented(t *testing.T) {
	for _, p := range sourcePackages(t) {
		if p.name == "main" {
			continue
		}
		dp, err := doc.NewFromFiles(p.fset, p.files, "github.com/idemkit/idemkit/"+p.dir)
		if err != nil {
			t.Errorf("%s: %v", p.dir, err)
			continue
		}
		c := undocumented{t: t, fset: p.fset}
		for _, v := range append(slices.Clone(dp.Consts), dp.Vars...) {
			c.value(v)
		}
		for _, f := range dp.Funcs {
			c.fn(f)
		}
		for _, typ := range dp.Types {
			c.check(typ.Decl.Pos(), typ.Name, typ.Doc)
			for _, v := range append(slices.Clone(typ.Consts), typ.Vars...) {
				c.value(v)
			}
			for _, f := range typ.Funcs {
				c.fn(f)
			}
			for _, m := range typ.Methods {
				c.fn(m)
			}
			if p.dir == "idempotent" || strings.HasPrefix(p.dir, "idempotent/") {
				c.fields(typ)
			}
		}
	}
}

type undocumented struct {
	t    *testing.T
	fset *token.FileSet
}

func (c undocumented) check(pos token.Pos, name, text string) {
	c.t.Helper()
	switch {
	case strings.TrimSpace(text) == "":
		c.t.Errorf("%s: exported %s has no doc comment", c.position(pos), name)
	case !strings.Contains(text, "."):
		c.t.Errorf("%s: the doc comment of %s is not a sentence: %q", c.position(pos), name, text)
	}
}

func (c undocumented) position(pos token.Pos) string {
	p := c.fset.Position(pos)
	rel, err := filepath.Rel(repoRoot, p.Filename)
	if err != nil {
		rel = p.Filename
	}
	return filepath.ToSlash(rel) + ":" + strconv.Itoa(p.Line)
}

func (c undocumented) fn(f *doc.Func) {
	c.t.Helper()
	name := f.Name
	if f.Recv != "" {
		name = strings.TrimPrefix(f.Recv, "*") + "." + f.Name
	}
	c.check(f.Decl.Pos(), name, f.Doc)
}

// value checks a const or var declaration: its group comment covers every
// name in it; without one, each exported spec needs its own comment.
func (c undocumented) value(v *doc.Value) {
	c.t.Helper()
	if strings.TrimSpace(v.Doc) != "" {
		return
	}
	for _, spec := range v.Decl.Specs {
		vs := spec.(*ast.ValueSpec)
		for _, n := range vs.Names {
			if n.IsExported() && vs.Doc == nil && vs.Comment == nil {
				c.t.Errorf("%s: exported %s has no doc comment", c.position(n.Pos()), n.Name)
			}
		}
	}
}

// fields checks the exported fields of a struct; embedded fields are
// documented where their type is.
func (c undocumented) fields(typ *doc.Type) {
	c.t.Helper()
	for _, spec := range typ.Decl.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typ.Name {
			continue
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, f := range st.Fields.List {
			for _, n := range f.Names {
				if n.IsExported() && f.Doc == nil && f.Comment == nil {
					c.t.Errorf("%s: exported %s.%s has no doc comment", c.position(n.Pos()), typ.Name, n.Name)
				}
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestRepoRoot guards the walk: the tests must see the repository root.
func TestRepoRoot(t *testing.T) {
	for _, f := range []string{"go.mod", "Makefile", "README.md"} {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err != nil {
			t.Fatalf("%s not found at %s: %v", f, repoRoot, err)
		}
	}
}
