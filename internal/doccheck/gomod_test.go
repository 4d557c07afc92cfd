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

// The Go version policy (CONTRIBUTING.md, "Go versions"): go.mod's go line is
// the lowest Go our dependencies allow, and one dependency is held back
// because its next version raises it. These constants are what
// CONTRIBUTING.md states; the test fails when go.mod, CI or the document
// drift apart.
const (
	goLine = "1.24.0"
	// Held back: v1.55.0 needs go 1.26.
	awsLambdaGo = "github.com/aws/aws-lambda-go v1.54.0"
)

func TestGoVersionPolicy(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := string(raw)
	if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(mod); m == nil || m[1] != goLine {
		t.Errorf("go.mod's go line is %q, CONTRIBUTING.md documents %s: raise it only with a reason, and update both", m, goLine)
	}
	if regexp.MustCompile(`(?m)^toolchain `).MatchString(mod) {
		t.Error("go.mod has a toolchain line: it would make `go` fetch a newer toolchain for users of the library")
	}
	for _, req := range []string{awsLambdaGo} {
		if !strings.Contains(mod, "\t"+req+" ") && !strings.Contains(mod, "\t"+req+"\n") {
			t.Errorf("go.mod does not require %s, which keeps the go line at %s (see CONTRIBUTING.md)", req, goLine)
		}
	}

	contributing := readDoc(t, "CONTRIBUTING.md")
	for _, want := range []string{"go " + goLine, strings.Fields(awsLambdaGo)[1], "make test-min-go"} {
		if !strings.Contains(contributing, want) {
			t.Errorf("CONTRIBUTING.md does not mention %q", want)
		}
	}

	ci, err := os.ReadFile(filepath.Join(repoRoot, ".github", "workflows", "ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	minor := goLine[:strings.LastIndex(goLine, ".")]
	if !strings.Contains(string(ci), `"`+minor+`.x"`) {
		t.Errorf(".github/workflows/ci.yml does not test Go %s.x, go.mod's go line", minor)
	}
}

// libraryRequirements is everything the root module may require directly:
// what the library's packages import, and the test-only testify and rapid
// (CONTRIBUTING.md, "Go versions"). A user of the library inherits these and
// nothing else; programs that need more (the CDK stack, the deployed e2e
// suite's Lambda and SQS clients) live in modules of their own.
var libraryRequirements = map[string]bool{
	"github.com/aws/aws-lambda-go":                                 true,
	"github.com/aws/aws-sdk-go-v2":                                 true,
	"github.com/aws/aws-sdk-go-v2/config":                          true, // the examples and the samples' set-up
	"github.com/aws/aws-sdk-go-v2/credentials":                     true, // local servers' test/test credentials
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue": true,
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression":     true,
	"github.com/aws/aws-sdk-go-v2/service/dynamodb":                true,
	"github.com/aws/smithy-go":                                     true,
	"github.com/hashicorp/golang-lru/v2":                           true,
	"github.com/jackc/pgx/v5":                                      true, // idempotent/pgstore only (TestOnlyPgstoreImportsPgx)
	"github.com/redis/go-redis/v9":                                 true,
	"github.com/stretchr/testify":                                  true, // tests only
	"pgregory.net/rapid":                                           true, // tests only (internal/modelcheck)
}

func TestLibraryModuleIsLean(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	direct := regexp.MustCompile(`(?m)^\t(\S+) v\S+$`) // indirect requirements end in "// indirect"
	found := 0
	for _, m := range direct.FindAllStringSubmatch(string(raw), -1) {
		found++
		if !libraryRequirements[m[1]] {
			t.Errorf("go.mod requires %s directly: users of the library would inherit it; move the program that needs it to a module of its own (CONTRIBUTING.md, \"Go versions\")", m[1])
		}
	}
	if found == 0 {
		t.Fatal("found no direct requirement in go.mod: the pattern no longer matches its format")
	}
}

// TestBinariesDoNotLinkTesting keeps package testing out of the programs,
// every main package of the module (issue 23: the demo linked it through
// internal/localddb). The one exception is a test's own child process.
func TestBinariesDoNotLinkTesting(t *testing.T) {
	exempt := map[string]string{
		module + "/reliability/internal/crashee": "the child process reliability's crash tests build and kill",
	}
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	mains := strings.Fields(string(out))
	for _, want := range []string{"/cmd/demo", "/cmd/idemkit", "/functions/payments/cmd/bootstrap",
		"/functions/payments/cmd/url", "/functions/orders/cmd/bootstrap", "/bench"} {
		if !slices.Contains(mains, module+want) {
			t.Errorf("go list found no main package %s: the listing is broken", module+want)
		}
	}
	for _, pkg := range mains {
		if _, ok := exempt[pkg]; ok {
			continue
		}
		if slices.Contains(deps(t, pkg), "testing") {
			t.Errorf("%s links package testing", pkg)
		}
	}
}

// TestLayout keeps the layout showing the architecture (issue 23, item 7):
// the library (idempotent/...) depends on no package of the module outside
// it (its private packages live in idempotent/internal; the root internal/
// holds the repository's tools), and events/ holds sample events, not Go.
func TestLayout(t *testing.T) {
	for _, dep := range deps(t, "./idempotent/...") {
		if strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(dep, module+"/idempotent") {
			t.Errorf("the library depends on %s; move what it needs under idempotent/internal", dep)
		}
	}
	goFiles, err := filepath.Glob(filepath.Join(repoRoot, "events", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(goFiles) > 0 {
		t.Errorf("events/ holds Go files %v: it holds the sample events; their reader is internal/sampleevents", goFiles)
	}
}

// TestStoresImportOnlyStorage keeps the stores on the implementer's side of
// the split (as drivers know only database/sql/driver): no store imports the
// front-door package idempotent.
func TestStoresImportOnlyStorage(t *testing.T) {
	for _, pkg := range []string{"./idempotent/dynamostore", "./idempotent/redisstore", "./idempotent/pgstore", "./idempotent/storetest"} {
		if slices.Contains(deps(t, pkg), "github.com/idemkit/idemkit/idempotent") {
			t.Errorf("%s imports package idempotent; use idempotent/storage", pkg)
		}
	}
}

// TestOnlyPgstoreImportsPgx keeps PostgreSQL code out of every other
// library package. The root module requires pgx for idempotent/pgstore
// alone; with Go's module graph pruning (go 1.17+), a user module that
// imports none of pgstore downloads only pgx's go.mod, never its source, and
// builds none of it, as long as no package it imports depends on pgx.
func TestOnlyPgstoreImportsPgx(t *testing.T) {
	cmd := exec.Command("go", "list", "./idempotent/...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./idempotent/...: %v", err)
	}
	checked := 0
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/idemkit/idemkit/idempotent/pgstore" {
			continue
		}
		checked++
		for _, dep := range deps(t, pkg) {
			if strings.HasPrefix(dep, "github.com/jackc/") {
				t.Errorf("%s depends on %s: a user of it would download and build PostgreSQL code", pkg, dep)
				break
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d packages: go list no longer finds the library", checked)
	}
}

// deps lists the packages pkg depends on, itself included (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
