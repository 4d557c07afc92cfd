package main

import (
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// receiptsAsset is the folder under the assets dir with the receipts
// function's bootstrap (make build: build/receipts/bootstrap, from
// functions/receipts/cmd/bootstrap).
const receiptsAsset = "receipts"

// The receipts function and its event source mapping on the payments
// table's stream. README.md ("Timing") repeats the reasons.
const (
	// receiptsTimeout is 30 s, as for orders: a batch of 20 payments, 4 at a
	// time, is 5 rounds of a claim, a step record, a send and a completion,
	// well under a second on DynamoDB, with room for a slow mail API. A
	// lease is then at most 32 s.
	receiptsTimeout = 30 * time.Second
	// receiptsBatchSize bounds the work redone when an invocation times out
	// or crashes (its whole batch comes back, bisected), and keeps a batch
	// far inside the timeout.
	receiptsBatchSize = 20
	// receiptsRetryAttempts bounds the retries of a batch that keeps failing
	// (a record that never succeeds blocks its shard: every later payment's
	// receipt waits behind it). After them Lambda sends the batch's
	// description to the on-failure queue and moves on. Ten retries, each
	// bisecting the batch, isolate one bad record and still give a mail API
	// outage a few minutes.
	receiptsRetryAttempts = 10
	// receiptsMaxRecordAge bounds how long a record may wait, failing or
	// behind a backlog, before it goes to the on-failure queue: six hours,
	// below the stream's 24 h retention, so the records the queue describes
	// can still be read from the stream when someone acts on the alarm.
	receiptsMaxRecordAge = 6 * time.Hour
	// receiptsFailureRetentionDays keeps the on-failure queue's messages as
	// long as SQS allows. They describe records (shard, sequence numbers),
	// which the stream keeps 24 h only: the alarm is what matters.
	receiptsFailureRetentionDays = 14
)

// newReceipts defines the receipts function on the payments table's stream:
// an event source mapping with partial batch responses
// (ReportBatchItemFailures), bisect on error, bounded retries and record age,
// an SQS on-failure destination, starting at TRIM_HORIZON, and a filter that
// passes INSERTs only (a receipt per new payment; the function ignores the
// other changes anyway, so the filter only saves invocations).
//
// TRIM_HORIZON rather than LATEST: the stream is created with the mapping,
// so the oldest record is the first payment after the deploy and nothing is
// missed; a mapping created again later re-reads up to 24 h of payments,
// whose receipts replay from their idempotency records (receipts.Expiry is
// 48 h). LATEST would skip the payments written while the mapping is being
// created: receipts that are never sent.
//
// The function reads no table (the payments come in the stream's images):
// it gets the idempotency table's actions, its log group, and what the
// mapping grants: reading the stream and sending to the on-failure queue.
func newReceipts(scope constructs.Construct, assetsDir string, arch awslambda.Architecture, idempotency, payments awsdynamodb.Table) (awslambda.Function, awssqs.Queue) {
	fn := newFunction(scope, functionSpec{
		id:          "Receipts",
		asset:       filepath.Join(assetsDir, receiptsAsset),
		description: "idemkit sample: DynamoDB Streams consumer of the payments table, one receipt per payment",
		timeout:     receiptsTimeout,
		arch:        arch,
		tables: []tableAccess{
			{spec: idempotencyTable, table: idempotency, actions: idempotencyActions},
		},
	})
	failures := awssqs.NewQueue(scope, jsii.String("ReceiptsFailureQueue"), &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(receiptsFailureRetentionDays)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
	})
	fn.AddEventSource(awslambdaeventsources.NewDynamoEventSource(payments, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition: awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:        jsii.Number(receiptsBatchSize),
		// Without it Lambda ignores the partial batch response: the function
		// returns no error, so the shard is checkpointed past the whole batch
		// and the failed receipts are never sent.
		ReportBatchItemFailures: jsii.Bool(true),
		// An invocation that fails as a whole (a timeout, a crash) comes back
		// in halves, so one slow or crashing record is isolated.
		BisectBatchOnError: jsii.Bool(true),
		RetryAttempts:      jsii.Number(receiptsRetryAttempts),
		MaxRecordAge:       seconds(receiptsMaxRecordAge),
		OnFailure:          awslambdaeventsources.NewSqsDlq(failures),
		Filters: &[]*map[string]any{
			awslambda.FilterCriteria_Filter(&map[string]any{"eventName": awslambda.FilterRule_IsEqual(jsii.String("INSERT"))}),
		},
	}))
	output(scope, "ReceiptsFunctionName", fn.FunctionName(), "Name of the receipts function (DynamoDB stream of the payments table)")
	output(scope, "ReceiptsFailureQueueUrl", failures.QueueUrl(), "URL of the receipts on-failure queue (descriptions of stream batches that failed every retry)")
	return fn, failures
}
