package main

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPropsFromContext(t *testing.T) {
	tests := []struct {
		name       string
		context    map[string]any
		wantAssets string
		wantRetain bool
		wantNoAPI  bool
		wantArch   string
		wantErr    string
	}{
		{name: "defaults", context: nil, wantAssets: "../build", wantArch: ""},
		{name: "command line strings", context: map[string]any{
			"assetsDir": "/tmp/x", "retainTables": "true", "httpApi": "false", "lambdaArchitecture": "x86_64",
		}, wantAssets: "/tmp/x", wantRetain: true, wantNoAPI: true, wantArch: "x86_64"},
		{name: "cdk.json booleans", context: map[string]any{"retainTables": true, "httpApi": true},
			wantAssets: "../build", wantRetain: true},
		{name: "go env GOARCH", context: map[string]any{"lambdaArchitecture": "amd64"}, wantAssets: "../build", wantArch: "x86_64"},
		{name: "arm64", context: map[string]any{"lambdaArchitecture": "arm64"}, wantAssets: "../build", wantArch: "arm64"},
		{name: "bad bool", context: map[string]any{"retainTables": "yes please"}, wantErr: "context retainTables: want true or false"},
		{name: "bad type", context: map[string]any{"httpApi": 1.0}, wantErr: "context httpApi: want true or false"},
		{name: "bad arch", context: map[string]any{"lambdaArchitecture": "riscv64"}, wantErr: "context lambdaArchitecture: want arm64 or x86_64"},
		{name: "empty assets", context: map[string]any{"assetsDir": ""}, wantErr: "context assetsDir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := map[string]any{}
			maps.Copy(ctx, tt.context)
			app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
			props, err := propsFromContext(app.Node())
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantAssets, props.AssetsDir)
			assert.Equal(t, tt.wantRetain, props.RetainTables)
			assert.Equal(t, tt.wantNoAPI, props.OmitHTTPAPI)
			if tt.wantArch == "" {
				assert.Nil(t, props.Architecture)
			} else {
				require.NotNil(t, props.Architecture)
				assert.Equal(t, tt.wantArch, *props.Architecture.Name())
			}
			assert.Nil(t, props.Env, "the stack is environment-agnostic: no lookups, offline synth")
		})
	}
}

func TestCheckAssets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "payments", "bootstrap"), 0o755)) // a folder, not a binary
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "orders"), 0o755))

	err := checkAssets(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "payments", "bootstrap")+" is not a regular file")
	assert.Contains(t, err.Error(), filepath.Join(dir, "orders", "bootstrap")+" is missing: run `make build` first")

	require.NoError(t, checkAssets(placeholderAssets))
}
