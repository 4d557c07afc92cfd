// Command hello is the baseline of the cold-start benchmark: the smallest
// aws-lambda-go function, built exactly as the sample functions are
// (GOOS=linux CGO_ENABLED=0 -tags lambda.norpc -trimpath -ldflags='-s -w').
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, json.RawMessage) (map[string]string, error) {
		return map[string]string{"hello": "world"}, nil
	})
}
