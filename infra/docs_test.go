package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// provisioningDoc is the guide to creating the idempotency table without the
// stack. Its CloudFormation (```yaml) and AWS CLI (```sh) blocks are marked
// "# checked-by: infra/docs_test.go"; internal/doccheck hands them to the
// tests below, which compare them with the table this stack synthesizes, so
// the guide and the stack have one source of truth.
const provisioningDoc = "../docs/provisioning.md"

// retainVariant is the stack as production should deploy it (-c
// retainTables=true): the guide's table is that one.
var retainVariant = variant{name: "retainTables", retain: true}

// docBlocks returns the fenced code blocks of a Markdown file with the given
// language, without their fences.
func docBlocks(t *testing.T, path, lang string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```"+lang:
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// checkedBlock returns the one block of lang marked for this file.
func checkedBlock(t *testing.T, lang string) string {
	t.Helper()
	var found []string
	for _, b := range docBlocks(t, provisioningDoc, lang) {
		if strings.HasPrefix(b, "# checked-by: infra/docs_test.go\n") {
			found = append(found, b)
		}
	}
	require.Len(t, found, 1, "want one ```%s block in %s marked checked-by: infra/docs_test.go", lang, provisioningDoc)
	return found[0]
}

// cfnValue converts a YAML node to the JSON shape of a synthesized template:
// the short forms !Ref and !GetAtt become {"Ref": ...} and {"Fn::GetAtt": [...]}.
func cfnValue(t *testing.T, n *yaml.Node) any {
	t.Helper()
	switch n.Tag {
	case "!Ref":
		return map[string]any{"Ref": n.Value}
	case "!GetAtt":
		resource, attr, ok := strings.Cut(n.Value, ".")
		require.True(t, ok, "!GetAtt %s", n.Value)
		return map[string]any{"Fn::GetAtt": []any{resource, attr}}
	}
	require.False(t, strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"), "tag %s: only !Ref and !GetAtt are checked", n.Tag)
	switch n.Kind {
	case yaml.DocumentNode:
		return cfnValue(t, n.Content[0])
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = cfnValue(t, n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		s := []any{}
		for _, c := range n.Content {
			s = append(s, cfnValue(t, c))
		}
		return s
	default:
		var v any
		require.NoError(t, n.Decode(&v))
		return toJSONValue(t, v)
	}
}

// TestProvisioningCloudFormation: the guide's template creates the stack's
// idempotency table (every property, and the retain policies) and a policy
// with exactly the stack's actions on it.
func TestProvisioningCloudFormation(t *testing.T) {
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(checkedBlock(t, "yaml")), &doc))
	tpl, ok := cfnValue(t, &doc).(map[string]any)
	require.True(t, ok)
	resources, ok := tpl["Resources"].(map[string]any)
	require.True(t, ok, "no Resources")

	var tables, policies []string
	for id, r := range resources {
		switch r.(map[string]any)["Type"] {
		case "AWS::DynamoDB::Table":
			tables = append(tables, id)
		case "AWS::IAM::ManagedPolicy":
			policies = append(policies, id)
		default:
			t.Errorf("resource %s: type %v is not checked", id, r.(map[string]any)["Type"])
		}
	}
	require.Len(t, tables, 1, "one table")
	require.Len(t, policies, 1, "one policy")

	s := synth(t, retainVariant)
	_, want := s.resource(t, "AWS::DynamoDB::Table", idempotencyTable.ID)
	got := resources[tables[0]].(map[string]any)
	assert.Equal(t, want["Properties"], got["Properties"], "table properties")
	for _, k := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
		assert.Equal(t, want[k], got[k], k)
	}
	assert.ElementsMatch(t, []string{"Type", "Properties", "DeletionPolicy", "UpdateReplacePolicy"}, sortedKeys(got), "table attributes")

	doc2 := resources[policies[0]].(map[string]any)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
	stmts := doc2["Statement"].([]any)
	require.Len(t, stmts, 1)
	stmt := stmts[0].(map[string]any)
	assert.Equal(t, "Allow", stmt["Effect"])
	assert.ElementsMatch(t, toJSONValue(t, idempotencyActions), stmt["Action"], "the store's actions, as the stack grants them")
	assert.Equal(t, map[string]any{"Fn::GetAtt": []any{tables[0], "Arn"}}, stmt["Resource"], "on the table only")
}

// TestProvisioningCLI: the guide's AWS CLI commands create the same table:
// key schema, attribute types, billing mode, deletion protection, TTL and
// point-in-time recovery. Every option is understood or the test fails, so
// nothing unchecked hides in the commands.
func TestProvisioningCLI(t *testing.T) {
	cmds := cliCommands(t, checkedBlock(t, "sh"))
	want := synth(t, retainVariant).props(t, "AWS::DynamoDB::Table", idempotencyTable.ID)

	got := map[string]any{}
	var tableNames []string
	seen := map[string]bool{}
	for _, c := range cmds {
		require.Equal(t, []string{"aws", "dynamodb"}, c.args[:2], "%q", c.args)
		op := c.args[2]
		if op == "wait" {
			require.Equal(t, "table-exists", c.args[3])
			c.args = c.args[4:]
		} else {
			c.args = c.args[3:]
			seen[op] = true
		}
		flags := parseFlags(t, c.args)
		tableNames = append(tableNames, flags["--table-name"])
		delete(flags, "--table-name")
		for flag, val := range flags {
			switch op + " " + flag {
			case "create-table --attribute-definitions":
				got["AttributeDefinitions"] = shorthandList(t, val)
			case "create-table --key-schema":
				got["KeySchema"] = shorthandList(t, val)
			case "create-table --billing-mode":
				got["BillingMode"] = val
			case "create-table --deletion-protection-enabled":
				got["DeletionProtectionEnabled"] = true
			case "update-time-to-live --time-to-live-specification":
				got["TimeToLiveSpecification"] = shorthand(t, val)
			case "update-continuous-backups --point-in-time-recovery-specification":
				got["PointInTimeRecoverySpecification"] = shorthand(t, val)
			default:
				t.Errorf("%s %s: not an option this test checks", op, flag)
			}
		}
	}
	for _, op := range []string{"create-table", "update-time-to-live", "update-continuous-backups"} {
		assert.True(t, seen[op], "no aws dynamodb %s", op)
	}
	for _, n := range tableNames {
		assert.Equal(t, tableNames[0], n, "every command names the same table")
	}
	assert.Equal(t, want, got, "the CLI's table is the stack's")
}

type cliCommand struct{ args []string }

// cliCommands splits a shell block into its commands (joining continuation
// lines, skipping comments and variable assignments) and each command into
// words, with $VAR expanded from the block's own assignments.
func cliCommands(t *testing.T, block string) []cliCommand {
	t.Helper()
	vars := map[string]string{}
	var out []cliCommand
	joined := strings.ReplaceAll(block, "\\\n", " ")
	assign := regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=(\S+)$`)
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := assign.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		words := shellWords(t, line)
		for i, w := range words {
			words[i] = os.Expand(w, func(name string) string {
				v, ok := vars[name]
				require.True(t, ok, "$%s is not set in the block", name)
				return v
			})
		}
		out = append(out, cliCommand{args: words})
	}
	require.NotEmpty(t, out)
	return out
}

// shellWords splits a line into words, honouring single and double quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			require.False(t, strings.ContainsRune("|&;<>`()", r), "shell syntax %q in %q: not a plain command", r, line)
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.Zero(t, quote, "unterminated quote in %q", line)
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// parseFlags reads "--name value" pairs; a flag followed by another flag (or
// nothing) is a switch, with value "".
func parseFlags(t *testing.T, args []string) map[string]string {
	t.Helper()
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		require.True(t, strings.HasPrefix(args[i], "--"), "argument %q is not a flag", args[i])
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			flags[args[i]] = args[i+1]
			i++
		} else {
			flags[args[i]] = ""
		}
	}
	return flags
}

// shorthand parses the AWS CLI's shorthand syntax for a structure,
// "Key=Value,Key=Value", into the JSON shape of the template (booleans as
// booleans).
func shorthand(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, "shorthand %q", s)
		switch v {
		case "true":
			m[k] = true
		case "false":
			m[k] = false
		default:
			m[k] = v
		}
	}
	return m
}

// shorthandList parses a list of one or more shorthand structures separated
// by spaces (here: one word per structure).
func shorthandList(t *testing.T, s string) []any {
	t.Helper()
	var out []any
	for _, item := range strings.Fields(s) {
		out = append(out, shorthand(t, item))
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestShellWords(t *testing.T) {
	got := shellWords(t, `aws dynamodb create-table --table-name "$TABLE" --x 'a b'`)
	assert.Equal(t, []string{"aws", "dynamodb", "create-table", "--table-name", "$TABLE", "--x", "a b"}, got)
	assert.Equal(t, map[string]any{"Enabled": true, "AttributeName": "expiration"}, shorthand(t, "Enabled=true,AttributeName=expiration"))
	assert.Equal(t, []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}}, shorthandList(t, "AttributeName=id,KeyType=HASH"))
}
