package lambdatest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AssertFailsFast starts the main package with the variables in unset
// unset and an unreachable Runtime API, and checks that it exits with
// status 1 after one JSON log line at level ERROR that names them, in order.
func AssertFailsFast(t testing.TB, unset ...string) {
	t.Helper()
	env := []string{"AWS_LAMBDA_RUNTIME_API=127.0.0.1:9"}
	for _, name := range unset {
		env = append(env, name+"=")
	}
	p := Start(t, env...)
	code, err := p.Wait(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, code)
	var line struct{ Level, Msg string }
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(p.Output())), &line), "one JSON line: %s", p.Output())
	assert.Equal(t, "ERROR", line.Level)
	assert.Contains(t, line.Msg, strings.Join(unset, ", "))
}

// AssertJSONLines checks that every line of out is a JSON document.
func AssertJSONLines(t testing.TB, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.True(t, json.Valid([]byte(line)), "a JSON log line: %s", line)
	}
}
