package deployed

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemkit/idemkit/functions/e2e"
)

// LambdaInvoker invokes a deployed function through the Lambda Invoke API
// (RequestResponse), as API Gateway and the SQS event source do. A function
// error (an unhandled error or a crash) is returned as an error.
func LambdaInvoker(client *awslambda.Client, functionName string) e2e.Invoker {
	return func(ctx context.Context, event []byte) ([]byte, error) {
		out, err := client.Invoke(ctx, &awslambda.InvokeInput{
			FunctionName:   aws.String(functionName),
			InvocationType: lambdatypes.InvocationTypeRequestResponse,
			Payload:        event,
		})
		if err != nil {
			return nil, fmt.Errorf("e2e: invoke %s: %w", functionName, err)
		}
		if out.FunctionError != nil {
			return nil, fmt.Errorf("e2e: %s failed (%s): %s", functionName, *out.FunctionError, out.Payload)
		}
		return out.Payload, nil
	}
}

// maxSendBatch is SQS's limit of entries per SendMessageBatch.
const maxSendBatch = 10

// SQSSender sends bodies to a deployed queue with SendMessageBatch, ten at a
// time. An entry SQS refuses is an error.
func SQSSender(client *sqs.Client, queueURL string) e2e.QueueSender {
	return func(ctx context.Context, bodies []string) error {
		for start := 0; start < len(bodies); start += maxSendBatch {
			chunk := bodies[start:min(start+maxSendBatch, len(bodies))]
			entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
			for i, b := range chunk {
				entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)}
			}
			out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			if err != nil {
				return fmt.Errorf("e2e: send to %s: %w", queueURL, err)
			}
			if len(out.Failed) > 0 {
				f := out.Failed[0]
				return fmt.Errorf("e2e: send to %s: %d of %d messages refused, first: %s %s",
					queueURL, len(out.Failed), len(chunk), aws.ToString(f.Code), aws.ToString(f.Message))
			}
		}
		return nil
	}
}
