package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

var (
	// stepRefRE matches a reference to steps by number: "step 3", "steps 18
	// and 19", "steps 16-17", "steps 3, 9 and 15", with the marker that may
	// follow it (see storySteps).
	stepRefRE = regexp.MustCompile(`(?i)\bsteps?\s+(\d+(?:\s*(?:,\s*and|,|and|-|–)\s*\d+)*)\b(\s*<!--\s*demo-step:([^>]*?)-->)?`)
	// markerRE matches a marker anywhere, to find those after no number.
	markerRE = regexp.MustCompile(`<!--\s*demo-step:`)
	// demoRE says a paragraph of the documentation is about the demo.
	demoRE = regexp.MustCompile(`(?i)\bdemo\b`)
)

// TestStepReferences checks every reference to the demo's steps by number
// against storySteps: in the Markdown files of the repository (README.md,
// docs/*.md, events/README.md, ...) and in cmd/demo's own source (its
// comments, its printed texts, its tests). A reference is "step N" (or
// "steps N and M", "steps N-M", ...) followed by a marker naming the steps,
// "<!-- demo-step: NAME ... -->", and the numbers must be those of the names.
// In a paragraph that mentions the demo, and anywhere in cmd/demo, a step
// number without a marker is an error: there it can only mean a demo step,
// and nothing would tell it was renumbered. Texts the demo prints take their
// numbers from stepNumber instead.
//
// CHANGELOG.md is not checked: each entry describes the demo of its release.
// TestCheckStepRefs checks the check.
func TestStepReferences(t *testing.T) {
	var checked int
	report := func(problems []string) {
		for _, p := range problems {
			t.Error(p)
		}
	}
	err := filepath.WalkDir(repoRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case ".git", "node_modules", "cdk.out", "build":
				return filepath.SkipDir
			}
			if strings.HasPrefix(e.Name(), ".") && path != repoRoot {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == "CHANGELOG.md", rel == "cmd/demo/steps_test.go": // history; this test's own cases
			return nil
		case strings.HasSuffix(rel, ".md"):
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, p := range markdownParagraphs(string(raw)) {
				problems, n := stepRefProblems(rel+":"+strconv.Itoa(p.line), p.text, demoRE.MatchString(p.text))
				report(problems)
				checked += n
			}
		case strings.HasPrefix(rel, "cmd/demo/") && strings.HasSuffix(rel, ".go"):
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			// Join line comments, so that a reference may break across lines.
			text := regexp.MustCompile(`\n\s*//\s*`).ReplaceAllString(string(raw), " ")
			problems, n := stepRefProblems(rel, text, true)
			report(problems)
			checked += n
		}
		return nil
	})
	require.NoError(t, err)
	// storySteps' own doc comment holds one; docs/streams.md and
	// events/README.md others.
	assert.GreaterOrEqual(t, checked, 3, "references checked")
}

// stepRefProblems checks the step references of one text (where names it in
// the problems) and returns what is wrong and how many references carry a
// marker. Without a marker, a number is a problem when demo says the text is
// about the demo.
func stepRefProblems(where, text string, demo bool) (problems []string, n int) {
	text = strings.Join(strings.Fields(text), " ")
	add := func(format string, args ...any) { problems = append(problems, where+": "+fmt.Sprintf(format, args...)) }
	matched := map[int]bool{} // offsets of the markers that follow a number
	for _, m := range stepRefRE.FindAllStringSubmatchIndex(text, -1) {
		ref := text[m[0]:m[1]]
		nums, ok := stepNumbers(text[m[2]:m[3]])
		switch {
		case !ok:
			add("%q: cannot read the step numbers", ref)
			continue
		case m[4] < 0:
			if demo {
				add("%q refers to the demo's steps by number without a marker: write %q (the names are cmd/demo's storySteps)",
					ref, text[m[0]:m[3]]+"<!-- demo-step: NAME ... -->")
			}
			continue
		}
		matched[m[4]+strings.Index(text[m[4]:m[5]], "<!--")] = true
		n++
		names := strings.Fields(text[m[6]:m[7]])
		if len(names) != len(nums) {
			add("%q: %d numbers, %d names", ref, len(nums), len(names))
			continue
		}
		for i, name := range names {
			at := slices.Index(storySteps, name)
			switch {
			case at < 0:
				add("%q: the demo has no step %q (cmd/demo's storySteps: %s)", ref, name, strings.Join(storySteps, " "))
			case at+1 != nums[i]:
				add("%q: %s is step %d of the demo, not %d: update the number", ref, name, at+1, nums[i])
			}
		}
	}
	for _, m := range markerRE.FindAllStringIndex(text, -1) {
		if !matched[m[0]] {
			add("a demo-step marker that follows no step number: %q", text[m[0]:min(len(text), m[0]+60)])
		}
	}
	return problems, n
}

// stepNumbers reads "3", "18 and 19", "16-17", "3, 9, and 15" (a range
// stands for every number in it).
func stepNumbers(s string) ([]int, bool) {
	var out []int
	for _, part := range regexp.MustCompile(`\s*(?:,\s*and|,|and)\s*`).Split(s, -1) {
		lo, hi, isRange := strings.Cut(strings.ReplaceAll(part, "–", "-"), "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, false
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, true
}

type paragraph struct {
	line int // 1-based line of its first line
	text string
}

// markdownParagraphs returns the prose of a Markdown document in paragraphs
// (runs of non-blank lines; a table is one), without its fenced code blocks.
func markdownParagraphs(doc string) []paragraph {
	var out []paragraph
	var cur []string
	start, fence := 0, ""
	flush := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{start, strings.Join(cur, "\n")})
		}
		cur = nil
	}
	for i, l := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			flush()
			fence = trimmed[:3]
			continue
		case trimmed == "":
			flush()
			continue
		}
		if len(cur) == 0 {
			start = i + 1
		}
		cur = append(cur, l)
	}
	flush()
	return out
}

// TestCheckStepRefs: the check finds what it must, and only that.
func TestCheckStepRefs(t *testing.T) {
	n := func(name string) string { return strconv.Itoa(stepNumber(name)) }
	good := []string{
		"`make demo` (steps " + n("receipts-checkpoint") + " and " + n("receipts-redelivery") + "<!-- demo-step: receipts-checkpoint receipts-redelivery -->)",
		"demo step " + n("concurrent-duplicates") + " <!-- demo-step: concurrent-duplicates -->",
		"the demo, steps " + n("web-new") + "-" + n("web-concurrent") + "<!-- demo-step: web-new web-concurrent -->",
		"the tests of step 4 (not about the d-e-m-o)",
	}
	for _, text := range good {
		problems, _ := stepRefProblems("good", text, demoRE.MatchString(text))
		assert.Empty(t, problems, "%q", text)
	}
	bad := []string{
		"`make demo` (steps 16 and 17)", // no marker
		"`make demo` (steps 16 and 17<!-- demo-step: receipts-checkpoint receipts-redelivery -->)", // renumbered
		"step " + n("new-payment") + "<!-- demo-step: new-payment replay -->",                      // one number, two names
		"step 1<!-- demo-step: no-such-step -->",
		"the demo <!-- demo-step: new-payment --> alone",
	}
	for _, text := range bad {
		problems, _ := stepRefProblems("bad", text, demoRE.MatchString(text))
		assert.NotEmpty(t, problems, "%q passed", text)
	}
	nums, ok := stepNumbers("3, 9, and 15")
	assert.True(t, ok)
	assert.Equal(t, []int{3, 9, 15}, nums)
	nums, _ = stepNumbers("16-18")
	assert.Equal(t, []int{16, 17, 18}, nums)
}
