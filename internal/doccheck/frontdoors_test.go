package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// frontDoors returns the library's public packages that are front doors: an
// exported function of theirs takes an *idempotent.Engine.
func frontDoors(t *testing.T) []string {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(repoRoot, "idempotent"))
	if err != nil {
		t.Fatal(err)
	}
	var doors []string
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "internal" || d.Name() == "testdata" {
			continue
		}
		files, err := filepath.Glob(filepath.Join(repoRoot, "idempotent", d.Name(), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if takesEngine(f) {
				doors = append(doors, d.Name())
				break
			}
		}
	}
	return doors
}

// takesEngine reports whether an exported function of f takes an
// *idempotent.Engine.
func takesEngine(f *ast.File) bool {
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || !fn.Name.IsExported() || fn.Recv != nil {
			continue
		}
		for _, p := range fn.Type.Params.List {
			star, ok := p.Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Engine" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "idempotent" {
					return true
				}
			}
		}
	}
	return false
}

// TestFrontDoorsAreListed keeps the lists of front doors true (issue 35):
// README's table, the core's package doc and CONTRIBUTING.md's layout name
// every package whose exported functions take an Engine.
func TestFrontDoorsAreListed(t *testing.T) {
	doors := frontDoors(t)
	if len(doors) < 6 {
		t.Fatalf("found only %d front-door packages (%v): the detection is broken", len(doors), doors)
	}
	readme := readDoc(t, "README.md")
	_, table, _ := strings.Cut(readme, "## Front doors")
	table, _, _ = strings.Cut(table, "\n## ")
	coreDoc := readDoc(t, "idempotent/doc.go")
	contributing := readDoc(t, "CONTRIBUTING.md")
	for _, door := range doors {
		if !strings.Contains(table, "`"+door+".") {
			t.Errorf("README.md's front doors table does not list %s", door)
		}
		if !strings.Contains(coreDoc, door) {
			t.Errorf("idempotent/doc.go does not name the front door %s", door)
		}
		if !strings.Contains(contributing, "`"+door+"`") {
			t.Errorf("CONTRIBUTING.md's layout does not name the front door %s", door)
		}
	}
}
