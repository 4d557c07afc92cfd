package idemkitcli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent"
)

// TestHelpSaysHowToNameARecord: the help says what a reader needs to find a
// record they just wrote, and what it says is so. The prefix off Lambda is
// the one the engine uses there (a record written by a test is found with
// it); --key is the raw key, --http-key the header as sent, quotes included,
// whose two forms name one record, and which is scoped to the caller, so
// --key does not name the adapter's record.
func TestHelpSaysHowToNameARecord(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "") // off Lambda
	var written string
	engine := idempotent.New(idempotent.NewMemoryStore(),
		idempotent.WithOutcomeHook(func(_ context.Context, e idempotent.Event) { written = e.RecordID }))
	h := idempotent.Wrap(engine, func(_ context.Context, s string) (string, error) { return s, nil },
		idempotent.WithKey(func(s string) (string, error) { return s, nil }))
	_, err := h(t.Context(), "o-1")
	require.NoError(t, err)
	prefix, _, ok := strings.Cut(written, "#")
	require.True(t, ok, written)

	now := time.Now()
	top := run(t, now, "--help")
	require.Equal(t, 0, top.code)
	for _, want := range []string{
		"AWS_LAMBDA_FUNCTION_NAME", `off Lambda` + "\n" + `  (that variable unset) it is "` + prefix + `"`,
		"K is the raw key itself", "without\n  its quotes",
		"as the client sent it, quotes included", `--http-key '"a b"' in the shell`, "--key never finds an API Gateway record",
	} {
		assert.Contains(t, top.stdout, want, "idemkit --help")
	}
	for _, cmd := range []string{"id", "inspect", "forget"} {
		r := run(t, now, cmd, "--help")
		require.Equal(t, 0, r.code, cmd)
		for _, want := range []string{`"` + prefix + `" off Lambda`, "without its quotes", "quotes included if any"} {
			assert.Contains(t, r.stdout, want, "idemkit %s --help", cmd)
		}
	}

	id := func(args ...string) string {
		t.Helper()
		r := run(t, now, append([]string{"id"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		return strings.TrimSpace(r.stdout)
	}
	assert.Equal(t, written, id("--prefix", prefix, "--key", "o-1"), "the record a test wrote off Lambda")
	quoted := id("--prefix", prefix, "--http-key", `"o-1"`, "--caller", "anonymous")
	assert.Equal(t, id("--prefix", prefix, "--http-key", "o-1", "--caller", "anonymous"), quoted, "both forms of the header name one record")
	assert.NotEqual(t, id("--prefix", prefix, "--key", "o-1"), quoted, "the adapter's record is scoped to the caller")
}
