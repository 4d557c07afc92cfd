package doccheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/localddb"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// tryingIt is the page that walks a reader through trying a handler by hand.
const tryingIt = "docs/trying-it.md"

// TestTryingItByHand follows docs/trying-it.md in a new module outside the
// repository, against the DynamoDB Local of scripts/with-dynamodb.sh (the
// environment `make ddb-local` prints): its ```sh blocks marked for this
// test (create the table with the AWS CLI, copy a sample event from
// events/, `go test` the page's event_test.go, find the record with
// `idemkit inspect`) run in one shell, as pasted: the test's retry must be
// answered from the record, and idemkit must find it, completed, from the
// event's raw key and caller. Then the page's `go test` line runs a second
// time, where the page says both calls are replays: so it must really run
// again (-count=1), not print the first run's output from Go's test cache.
// Without the aws command on PATH, the table is made with the SDK instead
// (and the test says so).
func TestTryingItByHand(t *testing.T) {
	mk := readDoc(t, "Makefile")
	if recipe, _, _ := strings.Cut(mk[strings.Index(mk, "\nddb-local:")+1:], "\n\n"); !strings.Contains(recipe, "AWS_DEFAULT_REGION=") {
		t.Errorf("make ddb-local must print AWS_DEFAULT_REGION too (AWS CLI v1 does not read AWS_REGION):\n%s", recipe)
	}
	client := localddbtest.Client(t)
	blocks, _ := parseMarkdown(tryingIt, readDoc(t, tryingIt))
	var script []string
	var program *block
	for _, b := range blocks {
		switch {
		case b.lang == "sh" && len(b.lines) > 0 && strings.TrimSpace(b.lines[0]) == "# checked-by: internal/doccheck/tryit_test.go":
			script = append(script, b.lines[1:]...)
		case b.lang == "go" && len(b.lines) > 0 && strings.TrimSpace(b.lines[0]) == "// event_test.go":
			program = &b
		}
	}
	if len(script) == 0 || program == nil {
		t.Fatalf("%s: want ```sh blocks marked \"# checked-by: internal/doccheck/tryit_test.go\" and a ```go block \"// event_test.go\"", tryingIt)
	}
	text := strings.Join(script, "\n")
	for _, want := range []string{"aws dynamodb create-table", "export IDEMPOTENCY_TABLE=", checkoutPlaceholder + "/events/",
		"go test -count=1 ", "idemkit inspect "} {
		if !strings.Contains(text, want) {
			t.Fatalf("%s: the commands do not say %q:\n%s", tryingIt, want, text)
		}
	}

	// A table of this test's own, under the page's name with a suffix.
	table := fmt.Sprintf("idempotency-trying-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = localddb.DeleteTable(t.Context(), client, table) })
	text = regexp.MustCompile(`\bidempotency\b`).ReplaceAllLiteralString(text, table)
	if _, err := exec.LookPath("aws"); err != nil {
		t.Logf("no aws command on PATH: the table is made with the SDK, and the page's AWS CLI line is not run")
		if err := localddb.CreateTable(t.Context(), client, localddb.Table{Name: table, PartitionKey: "id"}); err != nil {
			t.Fatal(err)
		}
		text = regexp.MustCompile(`(?m)^aws dynamodb create-table(?:[^\n]*\\\n)*[^\n]*\n`).ReplaceAllString(text, "")
	}

	m := newUserModule(t)
	// What `make ddb-local` prints besides what scripts/with-dynamodb.sh sets:
	// the region for AWS CLI v1, which does not read AWS_REGION.
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	m.env = append(m.env, "AWS_DEFAULT_REGION="+region)
	if err := os.WriteFile(filepath.Join(m.dir, "event_test.go"), []byte(program.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	m.useCheckout(t, checkoutCommands(t))
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	text = placeholderRE.ReplaceAllLiteralString(text, root)
	goTest := regexp.MustCompile(`(?m)^go test .*$`).FindString(text)
	if goTest == "" {
		t.Fatalf("%s: no `go test` command line in the marked blocks:\n%s", tryingIt, text)
	}
	// A reader runs the test a while after writing its files; go test caches
	// no result of a run that opened a file modified in the last seconds. So
	// the files are made an hour old before the page's go test runs.
	before, after, _ := strings.Cut(text, goTest)
	m.run(t, "bash", "-euo", "pipefail", "-c", before)
	past := time.Now().Add(-time.Hour)
	if err := filepath.WalkDir(m.dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, past, past)
	}); err != nil {
		t.Fatal(err)
	}
	const again = "--- the same go test, run again ---"
	out := m.run(t, "bash", "-euo", "pipefail", "-c", "export IDEMPOTENCY_TABLE="+table+"\n"+goTest+after+"\necho '"+again+"'\n"+goTest+"\n")
	first, second, _ := strings.Cut(out, again)
	for _, want := range []string{"--- PASS: TestSampleEvent", "retry: 201", `(Idempotent-Replayed: "true")`,
		"status   COMPLETED", "HTTP 201"} {
		if !strings.Contains(first, want) {
			t.Errorf("following %s, the commands printed no %q:\n%s", tryingIt, want, first)
		}
	}
	if !regexp.MustCompile(`first: 201 .*\(Idempotent-Replayed: "true"\)`).MatchString(second) {
		t.Errorf("%s says a second run's calls are both replays, but %q printed a first call that is not one "+
			"(without -count=1, go test prints the first run's output from its cache):\n%s", tryingIt, goTest, second)
	}
}
