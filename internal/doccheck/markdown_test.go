package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docFiles are the Markdown files whose code blocks and links are checked,
// relative to the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, _ := filepath.Rel(repoRoot, f)
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 8 {
		t.Fatalf("found %d documentation files, want README.md, CONTRIBUTING.md and the guides in docs/: %v", len(files), files)
	}
	return files
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// block is one fenced code block.
type block struct {
	file  string // the Markdown file, relative to the repository root
	line  int    // line of the opening fence, 1-based
	lang  string // the first word of the info string
	lines []string
}

func (b block) String() string { return b.file + ":" + strconv.Itoa(b.line) + " (```" + b.lang + ")" }

func (b block) text() string { return strings.Join(b.lines, "\n") + "\n" }

// fenceRE matches an opening fence: its indent, the fence, and the info
// string, whose first word is the language. A backtick fence's info string
// may not hold a backtick (CommonMark): "```` ```go ````" is inline code.
var fenceRE = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^`\\s]*)[^`]*$")

// parseMarkdown splits a Markdown document into its fenced code blocks and
// the prose between them (code blocks replaced by blank lines, so line
// numbers hold).
func parseMarkdown(file, text string) (blocks []block, prose []string) {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			prose = append(prose, lines[i])
			continue
		}
		indent, fence := len(m[1]), m[2]
		b := block{file: file, line: i + 1, lang: strings.ToLower(m[3])}
		prose = append(prose, "")
		for i++; i < len(lines); i++ {
			prose = append(prose, "")
			if strings.HasPrefix(strings.TrimSpace(lines[i]), fence) && strings.Trim(strings.TrimSpace(lines[i]), fence[:1]) == "" {
				break
			}
			l := lines[i]
			if len(l)-len(strings.TrimLeft(l, " ")) >= indent {
				l = l[indent:]
			}
			b.lines = append(b.lines, l)
		}
		blocks = append(blocks, b)
	}
	return blocks, prose
}

var (
	linkRE    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	codeRE    = regexp.MustCompile("`[^`]*`")
)

// anchors returns the GitHub anchors of a Markdown document's headings.
func anchors(text string) map[string]bool {
	_, prose := parseMarkdown("", text)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify makes a heading's anchor the way GitHub does: lower case, spaces
// to hyphens, punctuation other than hyphens and underscores dropped.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 0x7f && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }

// TestLinks: relative links in the documentation point to files that exist
// and, with a fragment, to headings that exist.
func TestLinks(t *testing.T) {
	for _, file := range docFiles(t) {
		text := readDoc(t, file)
		_, prose := parseMarkdown(file, text)
		for n, l := range prose {
			l = codeRE.ReplaceAllString(l, "")
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				where := file + ":" + strconv.Itoa(n+1)
				doc := file
				if path != "" {
					doc = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(repoRoot, doc)); err != nil {
						t.Errorf("%s: link to %s: %v", where, target, err)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(doc, ".md") && !anchors(readDoc(t, doc))[frag] {
					t.Errorf("%s: link to %s: %s has no heading with anchor #%s", where, target, doc, frag)
				}
			}
		}
	}
}

func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start":                     "quick-start",
		"Guarantees and non-guarantees":   "guarantees-and-non-guarantees",
		"The `lease`, and what it fences": "the-lease-and-what-it-fences",
		"SQS: visibility timeout (≥ 6×)":  "sqs-visibility-timeout--6",
		"Go 1.24.0":                       "go-1240",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
	if got := anchors("# A\n\n```sh\n# not a heading\n```\n## A\n"); !slices.Equal(sortedKeys(got), []string{"a", "a-1"}) {
		t.Errorf("anchors: %v", got)
	}
}

func sortedKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestBenchmarkHeadline: the figures the README quotes between
// <!-- bench:headline --> and <!-- /bench:headline --> are BENCHMARKS.md's,
// written by `make bench`: every decimal number there appears in it. After a
// new `make bench`, this fails until the README quotes the new figures.
func TestBenchmarkHeadline(t *testing.T) {
	readme := readDoc(t, "README.md")
	_, rest, ok := strings.Cut(readme, "<!-- bench:headline -->")
	if !ok {
		t.Fatal("README.md has no <!-- bench:headline --> marker")
	}
	block, _, ok := strings.Cut(rest, "<!-- /bench:headline -->")
	if !ok || strings.TrimSpace(block) == "" {
		t.Fatal("README.md's <!-- bench:headline --> block is missing its end marker or is empty: quote BENCHMARKS.md there")
	}
	bench := readDoc(t, "BENCHMARKS.md")
	figures := regexp.MustCompile(`\d+\.\d+`).FindAllString(block, -1)
	if len(figures) < 3 {
		t.Errorf("only %d figures in the headline: %q", len(figures), figures)
	}
	for _, f := range figures {
		if !strings.Contains(bench, f) {
			t.Errorf("README.md quotes %s, which BENCHMARKS.md does not hold: quote the current report", f)
		}
	}
}
