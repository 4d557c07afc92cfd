package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// stackName is the CloudFormation stack's name (cdk deploy Idemkit).
const stackName = "Idemkit"

// defaultAssetsDir is where `make build` leaves the binaries, relative to
// infra/ (the CDK CLI runs the app from there: cdk.json says "go run .").
const defaultAssetsDir = "../build"

// functionAssets are the folders under the assets dir, one per function,
// each holding one executable named bootstrap.
var functionAssets = []string{"payments", "orders", paymentsURLAsset, receiptsAsset}

func main() {
	// main returns through run so that jsii.Close (which stops the jsii
	// runtime's node process) runs before any exit.
	code := run()
	jsii.Close()
	os.Exit(code)
}

func run() int {
	app := awscdk.NewApp(nil)
	props, err := propsFromContext(app.Node())
	if err == nil {
		err = checkAssets(props.AssetsDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		return 1
	}
	NewIdemkitStack(app, stackName, props)
	app.Synth(nil)
	return 0
}

// propsFromContext reads the context keys described in doc.go. Values given
// with -c on the command line arrive as strings, values from cdk.json keep
// their JSON type, so both "true" and true are accepted.
func propsFromContext(node constructs.Node) (*IdemkitStackProps, error) {
	props := &IdemkitStackProps{
		StackProps: awscdk.StackProps{
			Description: jsii.String("idemkit sample stack: idempotent payments API and orders consumer"),
		},
		AssetsDir: defaultAssetsDir,
	}
	if v := node.TryGetContext(jsii.String("assetsDir")); v != nil {
		s, ok := v.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("context assetsDir: want a folder name, got %v", v)
		}
		props.AssetsDir = s
	}
	if v := node.TryGetContext(jsii.String("retainTables")); v != nil {
		b, err := contextBool(v)
		if err != nil {
			return nil, fmt.Errorf("context retainTables: %w", err)
		}
		props.RetainTables = b
	}
	if v := node.TryGetContext(jsii.String("lambdaArchitecture")); v != nil {
		arch, err := architecture(v)
		if err != nil {
			return nil, fmt.Errorf("context lambdaArchitecture: %w", err)
		}
		props.Architecture = arch
	}
	if v := node.TryGetContext(jsii.String("httpApi")); v != nil {
		b, err := contextBool(v)
		if err != nil {
			return nil, fmt.Errorf("context httpApi: %w", err)
		}
		props.OmitHTTPAPI = !b
	}
	return props, nil
}

// contextBool accepts a JSON boolean or a string strconv.ParseBool accepts.
func contextBool(v any) (bool, error) {
	switch v := v.(type) {
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("want true or false, got %q", v)
		}
		return b, nil
	}
	return false, fmt.Errorf("want true or false, got %v", v)
}

// architecture maps a Lambda architecture name to CDK's value. "amd64" is
// accepted for x86_64 so that `-c lambdaArchitecture=$(go env GOARCH)` works.
func architecture(v any) (awslambda.Architecture, error) {
	switch v {
	case "arm64":
		return awslambda.Architecture_ARM_64(), nil
	case "x86_64", "amd64":
		return awslambda.Architecture_X86_64(), nil
	}
	return nil, fmt.Errorf("want arm64 or x86_64, got %v", v)
}

// checkAssets reports a missing or non-regular bootstrap binary before CDK
// would stage (and deploy) a function without one.
func checkAssets(dir string) error {
	var errs []error
	for _, name := range functionAssets {
		path := filepath.Join(dir, name, "bootstrap")
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s is missing: run `make build` first, or pass -c assetsDir=DIR", path))
		case err != nil:
			errs = append(errs, err)
		case !info.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("%s is not a regular file", path))
		}
	}
	return errors.Join(errs...)
}
