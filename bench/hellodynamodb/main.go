// Command hellodynamodb is the second baseline of the cold-start benchmark:
// the hello-world function plus what any Go function that talks to DynamoDB
// does (config.LoadDefaultConfig and a client at init, one GetItem per
// invocation), built as the sample functions are. The call matters even
// though init never makes it: without one, the linker drops the client's
// operations, signing and credential chain, and the baseline would be a
// smaller binary than any real DynamoDB function. The sample functions' init
// minus this one is what idemkit itself costs at start-up.
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	table := os.Getenv("IDEMPOTENCY_TABLE")
	lambda.Start(func(ctx context.Context, _ json.RawMessage) (map[string]string, error) {
		// One read of an item that does not exist: the cheapest real call.
		_, err := client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &table,
			Key:       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "hello"}},
		})
		if err != nil {
			return nil, err
		}
		return map[string]string{"hello": "world"}, nil
	})
}
