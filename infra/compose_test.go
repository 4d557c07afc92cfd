package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needCompose is the check the Makefile's LocalStack targets run first.
const needCompose = "../scripts/need-compose.sh"

// TestNeedCompose runs scripts/need-compose.sh with a PATH of fake commands:
// each missing piece is named in one line on stderr, with exit status 2.
func TestNeedCompose(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	// Fake docker commands: the `docker compose version` and `docker info`
	// answers of the machines the script must tell apart.
	const (
		noCompose = "#!/bin/sh\n[ \"$1\" = compose ] && { echo \"unknown shorthand flag: 'f' in -f\" >&2; exit 125; }\nexit 0\n"
		noEngine  = "#!/bin/sh\n[ \"$1\" = info ] && { echo 'Cannot connect to the Docker daemon' >&2; exit 1; }\nexit 0\n"
		allThere  = "#!/bin/sh\nexit 0\n"
	)
	tests := []struct {
		name     string
		commands map[string]string // fake command name -> script
		want     string            // in the one line on stderr; "" means success
	}{
		{"no docker", nil, "docker not found"},
		{"docker without compose", map[string]string{"docker": noCompose}, "install the Compose v2 plugin"},
		{"compose v1 only", map[string]string{"docker": noCompose, "docker-compose": allThere}, "docker-compose (v1) is not enough"},
		{"engine not running", map[string]string{"docker": noEngine}, "the Docker engine does not answer"},
		{"all there", map[string]string{"docker": allThere}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, script := range tt.commands {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
			}
			cmd := exec.Command(bash, needCompose, "local-up")
			cmd.Env = append(os.Environ(), "PATH="+dir)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			assert.Empty(t, stdout.String())
			if tt.want == "" {
				assert.NoError(t, err, stderr.String())
				assert.Empty(t, stderr.String())
				return
			}
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 2, exit.ExitCode())
			msg := stderr.String()
			assert.Equal(t, 1, strings.Count(msg, "\n"), "one line: %q", msg)
			assert.True(t, strings.HasPrefix(msg, "idemkit: make local-up needs Docker with Compose v2: "), msg)
			assert.Contains(t, msg, tt.want)
		})
	}
}

// TestMakefileLocalStackChecksCompose: the LocalStack targets run the check
// before anything else, and make synth ends by printing where the template
// went.
func TestMakefileLocalStackChecksCompose(t *testing.T) {
	raw, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	mk := string(raw)
	for _, target := range []string{"local-up", "local-down", "deploy-local"} {
		m := regexp.MustCompile(`(?m)^` + target + `:[^\n]*\n\t([^\n]*)`).FindStringSubmatch(mk)
		require.NotNil(t, m, "Makefile has no target %s", target)
		assert.Equal(t, "@scripts/need-compose.sh $@", m[1], "%s's first command", target)
	}
	assert.Equal(t, "infra/cdk.out/"+stackName+".template.json", makeVars(t)["SYNTH_TEMPLATE"])
	synth := regexp.MustCompile(`(?m)^synth:[^\n]*\n((?:\t[^\n]*\n)+)`).FindStringSubmatch(mk)
	require.NotNil(t, synth, "Makefile has no synth target")
	recipe := strings.Split(strings.TrimSpace(synth[1]), "\n")
	assert.Contains(t, recipe[len(recipe)-1], `echo "template: $(SYNTH_TEMPLATE)"`, "make synth's last command prints the template's path")
}
