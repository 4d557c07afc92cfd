package main

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The deploy docs list what the stack creates by logical ID, so that what a
// reader sees in the CloudFormation console is what the docs name, and so
// that this test can hold the two together: infra/README.md's section
// "What the stack creates" names (in the first column of its tables, in
// backquotes) every resource of the types below and every stack output, and
// names nothing the template lacks. A new function, alarm or output is then
// one more row (or one more name in a row's {a,b} list) in that section.
const (
	infraReadme   = "README.md"
	rootReadme    = "../README.md"
	stackSection  = "What the stack creates"
	deploySection = "To AWS"
)

// documentedTypes are the resource types the docs must list one by one:
// what a deployer pays for, is told by, or calls.
var documentedTypes = []string{
	"AWS::Lambda::Function", "AWS::Lambda::Url", "AWS::CloudWatch::Alarm", "AWS::SNS::Topic",
	"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::ApiGatewayV2::Api",
}

// alarmMonthlyUSD is CloudWatch's price of a standard-resolution metric
// alarm, per alarm-month, in us-east-1 (https://aws.amazon.com/cloudwatch/pricing/).
const alarmMonthlyUSD = 0.10

// cdkHashRE is the 8-digit hash CDK appends to a construct path to make a
// logical ID.
var cdkHashRE = regexp.MustCompile(`[0-9A-F]{8}$`)

// templateNames returns the construct names (logical IDs without CDK's
// hash) of the documented resource types, and the stack outputs' names.
func templateNames(t *testing.T, s *synthesized) (resources map[string]string, outputs []string, all map[string]bool) {
	t.Helper()
	resources, all = map[string]string{}, map[string]bool{}
	for id, r := range s.json["Resources"].(map[string]any) {
		name := cdkHashRE.ReplaceAllString(id, "")
		all[name] = true
		if typ := r.(map[string]any)["Type"].(string); slices.Contains(documentedTypes, typ) {
			resources[name] = typ
		}
	}
	for name := range s.json["Outputs"].(map[string]any) {
		outputs = append(outputs, name)
		all[name] = true
	}
	return resources, outputs, all
}

// section returns the text of a Markdown file's section under the heading
// "## name" or "### name", up to the next heading of the same or a higher
// level.
func section(t *testing.T, path, name string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(raw), "\n")
	start := -1
	for i, l := range lines {
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if hashes == 0 || !strings.HasPrefix(l[hashes:], " ") {
			continue
		}
		switch {
		case start < 0 && strings.TrimSpace(l[hashes:]) == name:
			start = i + 1
		case start >= 0:
			return strings.Join(lines[start:i], "\n")
		}
	}
	require.GreaterOrEqual(t, start, 0, "%s has no section %q", path, name)
	return strings.Join(lines[start:], "\n")
}

var (
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
	braceRE    = regexp.MustCompile(`\{([^{}]*)\}`)
)

// documentedNames returns the names in backquotes in the first cell of the
// rows of the section's tables, with {a,b} lists expanded as a shell expands
// them: `{Payments,Orders}Function` names PaymentsFunction and OrdersFunction.
func documentedNames(text string) []string {
	var names []string
	for _, l := range strings.Split(text, "\n") {
		cells := strings.Split(strings.TrimSpace(l), "|")
		if len(cells) < 3 || cells[0] != "" {
			continue // not a table row
		}
		for _, m := range codeSpanRE.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, expandBraces(m[1])...)
		}
	}
	return names
}

// expandBraces expands every {a,b,...} of s, leftmost first.
func expandBraces(s string) []string {
	loc := braceRE.FindStringSubmatchIndex(s)
	if loc == nil {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[loc[2]:loc[3]], ",") {
		out = append(out, expandBraces(s[:loc[0]]+alt+s[loc[1]:])...)
	}
	return out
}

func TestExpandBraces(t *testing.T) {
	assert.Equal(t, []string{"A"}, expandBraces("A"))
	assert.Equal(t, []string{"PaymentsFunction", "OrdersFunction"}, expandBraces("{Payments,Orders}Function"))
	assert.Equal(t, []string{"AxC", "AyC", "BxC", "ByC"}, expandBraces("{A,B}{x,y}C"))
	assert.Equal(t, []string{"PaymentsApi", "Queue", "A", "B"},
		documentedNames("| `PaymentsApi` | x |\nnot `a` row\n|  `Queue` | `y` |\n| `A`, `B` | z |"))
}

// TestDeployDocsMatchTemplate: infra/README.md lists every function, Function
// URL, alarm, topic, table, queue and HTTP API of the template (the default
// deploy, with the HTTP API) and every output, and nothing else; its cost
// paragraph and the root README's deploy section count the alarms right and
// price them; the root README names every output.
func TestDeployDocsMatchTemplate(t *testing.T) {
	s := synth(t, defaultVariant)
	resources, outputs, all := templateNames(t, s)
	require.NotEmpty(t, resources)

	text := section(t, infraReadme, stackSection)
	documented := map[string]bool{}
	for _, n := range documentedNames(text) {
		assert.False(t, documented[n], "infra/README.md %q names %s twice", stackSection, n)
		documented[n] = true
		assert.True(t, all[n], "infra/README.md %q names %s, which the template has no resource or output of (logical IDs without CDK's hash)", stackSection, n)
	}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		assert.True(t, documented[name], "the template's %s %s is not listed in infra/README.md %q: add a row `%s`", resources[name], name, stackSection, name)
	}
	for _, name := range outputs {
		assert.True(t, documented[name], "the template's output %s is not listed in infra/README.md %q: add a row `%s`", name, stackSection, name)
	}

	alarms := 0
	for _, typ := range resources {
		if typ == "AWS::CloudWatch::Alarm" {
			alarms++
		}
	}
	deploy := section(t, rootReadme, deploySection)
	for _, doc := range []struct{ file, text string }{
		{"infra/README.md", section(t, infraReadme, "Removal policy and cost")},
		{"README.md " + deploySection, deploy},
	} {
		checkAlarmCost(t, doc.file, doc.text, alarms)
	}
	for _, name := range outputs {
		assert.Contains(t, deploy, "`"+name+"`", "README.md %q does not name the output %s", deploySection, name)
	}
}

// alarmCostRE is how the docs state the alarms' charge.
var alarmCostRE = regexp.MustCompile(`(\d+) alarms at \$0\.10 a month each: \$(\d+\.\d\d) a month`)

// checkAlarmCost: the text says "N alarms at $0.10 a month each: $X a month"
// with the template's number of alarms and its product.
func checkAlarmCost(t *testing.T, file, text string, alarms int) {
	t.Helper()
	m := alarmCostRE.FindStringSubmatch(strings.Join(strings.Fields(text), " "))
	if !assert.NotNil(t, m, "%s does not say what the alarms cost idle: %q", file, alarmCostRE) {
		return
	}
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Equal(t, alarms, n, "%s: the template has %d alarms", file, alarms)
	assert.Equal(t, fmt.Sprintf("%.2f", float64(alarms)*alarmMonthlyUSD), m[2], "%s: %d alarms × $%.2f", file, alarms, alarmMonthlyUSD)
}
