package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeVars reads the simple `NAME := value` assignments of the repository's
// Makefile, so the CLI tests run the commands make runs, not a copy of them.
func makeVars(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	vars := map[string]string{"HOST_GOARCH": runtime.GOARCH} // $(shell go env GOARCH)
	assign := regexp.MustCompile(`^([A-Z_]+)\s*:=\s*(.*)$`)
	for _, line := range strings.Split(string(raw), "\n") {
		if m := assign.FindStringSubmatch(line); m != nil && !strings.Contains(m[2], "$(shell") {
			vars[m[1]] = m[2]
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for name, v := range vars {
		vars[name] = ref.ReplaceAllStringFunc(v, func(r string) string { return vars[ref.FindStringSubmatch(r)[1]] })
	}
	return vars
}

// synthTemplate runs `npx --no-install <cli> synth` in infra/ with the
// Makefile's environment and flags plus args, into a temporary directory,
// and returns the stack's template.
func synthTemplate(t *testing.T, cli string, args ...string) map[string]any {
	t.Helper()
	npx, err := exec.LookPath("npx")
	require.NoError(t, err, "the CLI tests need Node.js and npm (make test-infra installs the pinned CLIs)")
	vars := makeVars(t)
	for _, name := range []string{"CDK_ENV", "CDK_FLAGS"} {
		require.NotEmpty(t, vars[name], "Makefile defines %s", name)
	}
	out := t.TempDir()
	cmdArgs := append([]string{"--no-install", cli, "synth"}, strings.Fields(vars["CDK_FLAGS"])...)
	cmdArgs = append(cmdArgs, "--quiet", "-o", out, "-c", "assetsDir="+placeholderAssets)
	cmd := exec.Command(npx, append(cmdArgs, args...)...)
	cmd.Env = append(os.Environ(), strings.Fields(vars["CDK_ENV"])...)
	combined, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s synth: %s", cli, combined)

	raw, err := os.ReadFile(filepath.Join(out, stackName+".template.json"))
	require.NoError(t, err, "%s synth wrote no %s template: %s", cli, stackName, combined)
	var tmpl map[string]any
	require.NoError(t, json.Unmarshal(raw, &tmpl))
	return tmpl
}

// resourcesOfType returns the template's resources of one type, by logical id.
func resourcesOfType(tmpl map[string]any, typ string) map[string]map[string]any {
	found := map[string]map[string]any{}
	resources, _ := tmpl["Resources"].(map[string]any)
	for id, r := range resources {
		if res, ok := r.(map[string]any); ok && res["Type"] == typ {
			found[id] = res
		}
	}
	return found
}

func architectures(t *testing.T, tmpl map[string]any) []any {
	t.Helper()
	fns := resourcesOfType(tmpl, "AWS::Lambda::Function")
	require.Len(t, fns, 4)
	var archs []any
	for _, fn := range fns {
		props, _ := fn["Properties"].(map[string]any)
		a, _ := props["Architectures"].([]any)
		require.Len(t, a, 1)
		archs = append(archs, a[0])
	}
	return archs
}

// TestCLISynth runs the pinned CLIs as `make synth` and `make deploy-local`
// do: offline, no account. The LocalStack variant must be the same stack
// (the same tables) without the HTTP API, for this machine's architecture.
func TestCLISynth(t *testing.T) {
	aws := synthTemplate(t, "cdk")
	assert.NotEmpty(t, resourcesOfType(aws, "AWS::ApiGatewayV2::Api"), "make synth: the HTTP API")
	assert.Equal(t, []any{"arm64", "arm64", "arm64", "arm64"}, architectures(t, aws))

	localContext := strings.Fields(makeVars(t)["LOCAL_CONTEXT"])
	require.Contains(t, localContext, "httpApi=false", "Makefile LOCAL_CONTEXT")
	mk, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	require.Contains(t, string(mk), "$(LOCAL_CONTEXT) --outputs-file", "deploy-local deploys with LOCAL_CONTEXT")

	local := synthTemplate(t, "cdklocal", localContext...)
	for typ := range map[string]bool{"AWS::ApiGatewayV2::Api": true, "AWS::ApiGatewayV2::Stage": true, "AWS::ApiGatewayV2::Integration": true} {
		assert.Empty(t, resourcesOfType(local, typ), "deploy-local: no %s on LocalStack's free image", typ)
	}
	want := map[string]string{"amd64": "x86_64", "arm64": "arm64"}[runtime.GOARCH]
	require.NotEmpty(t, want, "GOARCH %s", runtime.GOARCH)
	assert.Equal(t, []any{want, want, want, want}, architectures(t, local))

	assert.Equal(t, resourcesOfType(aws, "AWS::DynamoDB::Table"), resourcesOfType(local, "AWS::DynamoDB::Table"),
		"LocalStack gets the same tables")
	assert.Len(t, resourcesOfType(local, "AWS::DynamoDB::Table"), 3)
	assert.Equal(t, resourcesOfType(aws, "AWS::Lambda::EventSourceMapping"), resourcesOfType(local, "AWS::Lambda::EventSourceMapping"))
}
