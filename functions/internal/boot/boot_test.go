package boot_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/internal/boot"
)

func TestEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "a", "C": "c"}
	getenv := func(k string) string { return env[k] }

	got, err := boot.Env(getenv, "A", "C")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, got)

	_, err = boot.Env(getenv, "A", "B", "C", "D")
	var missing *boot.MissingEnvError
	require.True(t, errors.As(err, &missing))
	assert.Equal(t, []string{"B", "D"}, missing.Names)
	assert.EqualError(t, err, "boot: missing required environment variable(s): B, D")
}

// TestLogging is not parallel: it replaces the default logger.
func TestLogging(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	for _, tt := range []struct {
		level     string
		debug, ok bool
	}{
		{"", false, true}, {"DEBUG", true, true}, {"trace", true, true}, {"WARN", false, false}, {"ERROR", false, false},
	} {
		var buf bytes.Buffer
		boot.Logging(&buf, func(string) string { return tt.level })
		slog.Debug("debug line")
		slog.Info("info line", "k", 1)
		lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
		if !tt.ok {
			assert.Empty(t, buf.String(), "level %q", tt.level)
			continue
		}
		want := 1
		if tt.debug {
			want = 2
		}
		require.Len(t, lines, want, "level %q", tt.level)
		var rec map[string]any
		require.NoError(t, json.Unmarshal(lines[len(lines)-1], &rec), "JSON lines")
		assert.Equal(t, "info line", rec["msg"])
		assert.Equal(t, "INFO", rec["level"])
	}
}
