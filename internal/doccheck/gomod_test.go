package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go version policy (CONTRIBUTING.md, "Go versions"): go.mod's go line is
// the lowest Go our dependencies allow, and two dependencies are held back
// because their next versions raise it. These constants are what
// CONTRIBUTING.md states; the test fails when go.mod, CI or the document
// drift apart.
const (
	goLine = "1.24.0"
	// Held back: v1.55.0 needs go 1.26.
	awsLambdaGo = "github.com/aws/aws-lambda-go v1.54.0"
	// Held back: v0.20.0 needs go 1.25.
	xSync = "golang.org/x/sync v0.19.0"
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
	for _, req := range []string{awsLambdaGo, xSync} {
		if !strings.Contains(mod, "\t"+req+" ") && !strings.Contains(mod, "\t"+req+"\n") {
			t.Errorf("go.mod does not require %s, which keeps the go line at %s (see CONTRIBUTING.md)", req, goLine)
		}
	}

	contributing := readDoc(t, "CONTRIBUTING.md")
	for _, want := range []string{"go " + goLine, strings.Fields(awsLambdaGo)[1], strings.Fields(xSync)[1], "make test-min-go"} {
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
