package dynamostore_test

import (
	"context"
	"log"
	"os"
	"strconv"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

type ChargeRequest struct {
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
}

type ChargeResponse struct {
	PaymentID string `json:"payment_id"`
}

func charge(ctx context.Context, req ChargeRequest) (ChargeResponse, error) {
	// Pass idempotent.DownstreamKey(ctx) to the payment provider, so even a
	// re-run after a takeover charges once.
	return ChargeResponse{PaymentID: "pay_" + req.OrderID}, nil
}

// A Lambda function whose charges are idempotent per order: the store and the
// wrapped handler are created once, at cold start.
func Example() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(idempotent.Wrap(idempotent.New(store), charge,
		idempotent.WithKey(func(r ChargeRequest) (string, error) { return r.OrderID, nil }),
		idempotent.WithPayloadValidation(func(r ChargeRequest) (any, error) { return r, nil }),
	))
}

func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// With the default attribute names no options are needed; here two
	// attributes are renamed and items are capped at 100 KB.
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), "idempotency", func(o *dynamostore.Options) {
		o.ExpirationAttr = "ttl"
		o.DataAttr = "response"
		o.MaxItemBytes = 100 << 10
	})
	_ = store
}

// A table with a composite key (pk, sk), shared with other data: every record
// lives under one partition key value and is told apart by the sort key.
func ExampleNew_compositeKey() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), "app-table", func(o *dynamostore.Options) {
		o.KeyAttr = "pk"
		o.SortKeyAttr = "sk"
		o.StaticPartitionKey = "idempotency#payments"
	})
	_ = store
}

// Against DynamoDB Local or LocalStack: point the client at the endpoint and
// skip the response checksum DynamoDB Local does not send on errors.
func ExampleNew_dynamoDBLocal() {
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String("http://127.0.0.1:8000")
		o.DisableValidateResponseChecksum = true
	})
	_ = dynamostore.New(client, "idempotency")
}

type Reservation struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
	Qty     int    `json:"qty"`
}

// A handler whose own writes commit with its completion: the stock
// reservation (conditioned on enough stock) and the order row go in the
// same TransactWriteItems as the idempotency record's completion, or none
// of them does. A duplicate replays the response without writing again; a
// stale owner whose lease was taken over commits nothing.
func ExampleTransaction() {
	reserve := func(ctx context.Context, r Reservation) (string, error) {
		tx, err := dynamostore.Transaction(ctx)
		if err != nil {
			return "", err
		}
		err = tx.Add(
			types.TransactWriteItem{Update: &types.Update{
				TableName:           aws.String("inventory"),
				Key:                 map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: r.SKU}},
				UpdateExpression:    aws.String("ADD stock :minus"),
				ConditionExpression: aws.String("stock >= :qty"), // else the commit aborts: idempotent.ErrTxAborted
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":minus": &types.AttributeValueMemberN{Value: strconv.Itoa(-r.Qty)},
					":qty":   &types.AttributeValueMemberN{Value: strconv.Itoa(r.Qty)},
				},
			}},
			types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String("orders"),
				Item: map[string]types.AttributeValue{
					"orderId": &types.AttributeValueMemberS{Value: r.OrderID},
					"sku":     &types.AttributeValueMemberS{Value: r.SKU},
				},
			}},
		)
		if err != nil {
			return "", err // dynamostore.ErrTxLimit: nothing was added
		}
		return "reserved " + r.OrderID, nil // the writes commit when the handler returns
	}

	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(idempotent.Wrap(idempotent.New(store), reserve,
		idempotent.WithKey(func(r Reservation) (string, error) { return r.OrderID, nil })))
}
