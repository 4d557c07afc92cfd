package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreLinksNoOpenTelemetry keeps OpenTelemetry where issue 37 put it,
// in the otelidem module: no package of the root module (the core, the
// stores, the front doors, the programs) depends on it.
func TestCoreLinksNoOpenTelemetry(t *testing.T) {
	all := deps(t, "./...")
	if len(all) < 50 {
		t.Fatalf("go list -deps ./... found %d packages: the listing is broken", len(all))
	}
	for _, dep := range all {
		if strings.HasPrefix(dep, "go.opentelemetry.io/") {
			t.Errorf("the root module depends on %s: OpenTelemetry belongs in otelidem, its own module", dep)
		}
	}
}

// TestUserModuleDownloadsNoOpenTelemetryNorPgx is the check CONTRIBUTING.md
// ("Go versions") describes, run: a user's module that imports only the
// core and dynamostore, resolved and built with an empty module cache,
// downloads nothing of OpenTelemetry (otelidem's) nor of pgx (pgstore's),
// not even a go.mod. It fetches the module's real dependencies from the
// module proxy (about 40 MB), so -short skips it.
func TestUserModuleDownloadsNoOpenTelemetryNorPgx(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: it downloads the AWS SDK into an empty module cache")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir, cache := t.TempDir(), t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/user\n\ngo 1.24.0\n\nrequire github.com/idemkit/idemkit v0.0.0\n\nreplace github.com/idemkit/idemkit => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

func main() { _ = idempotent.New(dynamostore.New(nil, "t")) }
`)
	env := append(os.Environ(), "GOMODCACHE="+cache, "GOFLAGS=-mod=mod -modcacherw", "GOTOOLCHAIN=local", "GOWORK=off")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a user module: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	download := filepath.Join(cache, "cache", "download")
	if _, err := os.Stat(filepath.Join(download, "github.com", "aws")); err != nil {
		t.Fatalf("the module cache holds no AWS SDK (%v): the check looks in the wrong place", err)
	}
	for _, forbidden := range []string{"go.opentelemetry.io", filepath.Join("github.com", "jackc")} {
		if _, err := os.Stat(filepath.Join(download, forbidden)); err == nil {
			t.Errorf("a module that imports only idempotent and dynamostore downloaded %s", forbidden)
		}
	}
}
