package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const (
	initHook    = "../localstack/ready.d/10-tables.sh"
	composeFile = "../localstack/docker-compose.yml"
)

// fakeAWSLocal stands in for awslocal: it records each call's arguments
// (NUL-separated, one file per call, in call order) and answers the
// describe calls as if no table existed, or every table existed with its
// TTL on when EXIST is set.
const fakeAWSLocal = `#!/bin/bash
n=$(ls "$CALLS" | wc -l)
printf '%s\0' "$@" > "$CALLS/$(printf %04d "$n")"
case "$1 $2" in
"dynamodb describe-table")
	[ -n "$EXIST" ] && exit 0
	echo "ResourceNotFoundException" >&2
	exit 254
	;;
"dynamodb describe-time-to-live")
	if [ -n "$EXIST" ]; then echo ENABLED; else echo DISABLED; fi
	;;
esac
exit 0
`

// runInitHook runs the LocalStack init hook with the fake awslocal and
// returns the calls it made, each as its argument list.
func runInitHook(t *testing.T, tablesExist bool) [][]string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "the init hook is a bash script; make test needs bash anyway")
	bin, calls := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "awslocal"), []byte(fakeAWSLocal), 0o755))

	cmd := exec.Command(bash, initHook)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "CALLS="+calls)
	if tablesExist {
		cmd.Env = append(cmd.Env, "EXIST=1")
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	entries, err := os.ReadDir(calls)
	require.NoError(t, err)
	var got [][]string
	for _, e := range entries { // ReadDir sorts by name: call order
		raw, err := os.ReadFile(filepath.Join(calls, e.Name()))
		require.NoError(t, err)
		got = append(got, strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"))
	}
	return got
}

// cliInput returns the --cli-input-json argument of a call.
func cliInput(t *testing.T, call []string) []byte {
	t.Helper()
	i := slices.Index(call, "--cli-input-json")
	require.True(t, i >= 0 && i+1 < len(call), "no --cli-input-json in %q", call)
	return []byte(call[i+1])
}

// createTableInput is what the hook may pass to create-table: unknown
// fields (indexes, streams, provisioned throughput) fail the decode.
type createTableInput struct {
	TableName            string
	AttributeDefinitions []map[string]string
	KeySchema            []map[string]string
	BillingMode          string
}

type updateTimeToLiveInput struct {
	TableName               string
	TimeToLiveSpecification struct {
		AttributeName string
		Enabled       bool
	}
}

func decodeStrict(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", raw)
}

// TestLocalStackInitHookMatchesStack keeps one source of truth: the tables
// the LocalStack init hook creates must be the tables the CDK stack defines.
func TestLocalStackInitHookMatchesStack(t *testing.T) {
	creates := map[string]createTableInput{}
	ttls := map[string]updateTimeToLiveInput{}
	for _, call := range runInitHook(t, false) {
		require.Equal(t, "dynamodb", call[0], "%q", call)
		switch call[1] {
		case "create-table":
			var in createTableInput
			decodeStrict(t, cliInput(t, call), &in)
			require.NotContains(t, creates, in.TableName, "created twice")
			creates[in.TableName] = in
		case "update-time-to-live":
			var in updateTimeToLiveInput
			decodeStrict(t, cliInput(t, call), &in)
			ttls[in.TableName] = in
		case "describe-table", "describe-time-to-live", "wait":
		default:
			t.Errorf("unexpected call %q", call)
		}
	}
	require.Len(t, creates, len(Tables()), "the hook creates exactly the stack's tables")

	s := synth(t, defaultVariant)
	for _, spec := range Tables() {
		t.Run(spec.ID, func(t *testing.T) {
			in, ok := creates[spec.LocalName]
			require.True(t, ok, "the hook does not create %s", spec.LocalName)
			p := s.props(t, "AWS::DynamoDB::Table", spec.ID)

			assert.Equal(t, p["KeySchema"], toJSONValue(t, in.KeySchema), "KeySchema")
			assert.Equal(t, p["AttributeDefinitions"], toJSONValue(t, in.AttributeDefinitions), "AttributeDefinitions")
			assert.Equal(t, p["BillingMode"], in.BillingMode, "BillingMode")

			ttl, hasTTL := ttls[spec.LocalName]
			if want, ok := p["TimeToLiveSpecification"]; ok {
				require.True(t, hasTTL, "the hook does not enable TTL on %s", spec.LocalName)
				assert.Equal(t, want, toJSONValue(t, ttl.TimeToLiveSpecification), "TimeToLiveSpecification")
			} else {
				assert.False(t, hasTTL, "the hook enables TTL on %s, the stack does not", spec.LocalName)
			}
		})
	}
}

// toJSONValue round-trips v through JSON, to compare it with the template.
func toJSONValue(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

func TestLocalStackInitHookIsRerunnable(t *testing.T) {
	for _, call := range runInitHook(t, true) {
		assert.Contains(t, []string{"describe-table", "describe-time-to-live"}, call[1],
			"with the tables in place the hook only looks: %q", call)
	}
}

func TestLocalStackInitHookIsExecutable(t *testing.T) {
	info, err := os.Stat(initHook)
	require.NoError(t, err)
	assert.NotZero(t, info.Mode().Perm()&0o111, "LocalStack runs only executable init scripts")
	raw, err := os.ReadFile(initHook)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(raw, []byte("#!/bin/bash\n")), "LocalStack needs a shebang")
}

func TestLocalStackCompose(t *testing.T) {
	raw, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	ls, ok := compose.Services["localstack"]
	require.True(t, ok)

	assert.Equal(t, "localstack/localstack:4.14.0", ls.Image, "later tags need an auth token")
	require.NotEmpty(t, ls.Ports)
	for _, p := range ls.Ports {
		assert.True(t, strings.HasPrefix(p, "127.0.0.1:"), "port %q must bind to loopback only", p)
	}
	assert.Equal(t, "1", ls.Environment["DYNAMODB_REMOVE_EXPIRED_ITEMS"])
	services := strings.Split(ls.Environment["SERVICES"], ",")
	for _, need := range []string{"dynamodb", "lambda", "sqs", "apigateway", "iam", "logs", "cloudformation", "s3", "sts", "ssm"} {
		assert.Contains(t, services, need)
	}
	assert.Contains(t, ls.Volumes, "/var/run/docker.sock:/var/run/docker.sock", "LocalStack runs Lambda in containers")
	assert.Contains(t, ls.Volumes, "./ready.d:/etc/localstack/init/ready.d:ro")
}
