// Command hellodynamodb is the second baseline of the cold-start benchmark:
// the hello-world function plus what any Go function that talks to DynamoDB
// does at init (config.LoadDefaultConfig and a DynamoDB client), built as the
// sample functions are. The sample functions' init minus this one is what
// idemkit itself costs at start-up.
package main

import (
	"context"
	"encoding/json"
	"log"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	lambda.Start(func(context.Context, json.RawMessage) (map[string]string, error) {
		_ = client // created at init, as a real function would
		return map[string]string{"hello": "world"}, nil
	})
}
