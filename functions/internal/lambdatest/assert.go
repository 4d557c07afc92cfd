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

// Function is a main package served by a fake Runtime API.
type Function struct {
	*Process
	API *RuntimeAPI
}

// Serve starts a fake Runtime API and the main package against it, with env
// added as for Start; both stop when t ends.
func Serve(t testing.TB, env ...string) *Function {
	t.Helper()
	api := NewRuntimeAPI(t)
	return &Function{Process: Start(t, append([]string{"AWS_LAMBDA_RUNTIME_API=" + api.Address()}, env...)...), API: api}
}

// Invoke hands event to the function with a deadline timeout from now,
// requires an answer that is not an error, and decodes that answer into resp.
func (f *Function) Invoke(t testing.TB, event []byte, timeout time.Duration, resp any) {
	t.Helper()
	res, err := f.API.Invoke(t.Context(), event, timeout)
	require.NoError(t, err, "output: %s", f.Output())
	require.False(t, res.Failed, "%s", res.Body)
	require.NoError(t, json.Unmarshal(res.Body, resp))
}

// AssertJSONLines checks that every line of out is a JSON document.
func AssertJSONLines(t testing.TB, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.True(t, json.Valid([]byte(line)), "a JSON log line: %s", line)
	}
}
