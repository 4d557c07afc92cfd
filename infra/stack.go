package main

import (
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Timing. The numbers depend on each other; README.md ("Timing") has the
// same arithmetic for readers who do not open this file.
//
// The idempotency wrapper takes a lease that ends no later than the
// invocation's deadline (ctx.Deadline(), i.e. the function timeout) plus a
// clock-skew margin, so a lease is at most timeout + 2 s. Once it has ended,
// a duplicate may take the record over; before that, a duplicate is told
// "in progress" and, on SQS, reported as a batch item failure.
//
// Orders (SQS): timeout 30 s, so its lease is ≤ 32 s. A message's visibility
// clock starts when SQS hands it to the poller, not when the function finds
// its key in progress: that can be up to 30 s later (the invocation's whole
// time, messages of a lane running one after another), and the other owner's
// lease may run 32 s beyond that point. So the visibility timeout must exceed
// 30 s + 32 s = 62 s (plus any poller delay). It is 6 × 30 s = 180 s: AWS's
// advice (six times the function timeout, room for the poller to retry a
// throttled batch), leaving 118 s for such delays. A message reported as "in
// progress elsewhere" thus becomes visible again only after the other
// owner's lease has ended — its retry either replays the completed result or
// takes over a dead owner's record; it never meets the same lease twice.
//
// Payments (HTTP): timeout 10 s, so its lease is ≤ 12 s. A payment request
// is one claim, one ledger write and one completion — well under a second —
// and a short timeout keeps the window short in which a crashed invocation
// blocks its key. The HTTP API's integration timeout (30 s default) is above
// 10 s, so the function (and the adapter's own 503) always answers first.
const (
	clockSkewMargin = 2 * time.Second

	paymentsTimeout = 10 * time.Second
	ordersTimeout   = 30 * time.Second

	// ordersLeaseMax is the longest an orders invocation can hold a lease.
	ordersLeaseMax = ordersTimeout + clockSkewMargin
	// ordersVisibilityTimeout is AWS's six times the function timeout.
	ordersVisibilityTimeout = 6 * ordersTimeout
)

// The visibility timeout must outlast the time to the claim plus a lease
// (see above): this line stops compiling (constant overflows uint) if
// someone breaks that.
const _ uint = uint(ordersVisibilityTimeout - (ordersTimeout + ordersLeaseMax) - 1)

const (
	// Every function gets 256 MB: Lambda allocates CPU in proportion to
	// memory, and a Go binary that spends its time waiting on DynamoDB needs
	// neither more memory nor more CPU; 128 MB makes cold starts and TLS
	// handshakes noticeably slower for a fraction of a cent saved.
	functionMemoryMB = 256

	// ordersMaxReceiveCount is how often SQS delivers a message before moving
	// it to the dead-letter queue. One delivery may meet a duplicate still in
	// progress (reported as a batch item failure, retried after 180 s) and
	// another a throttled or unavailable table; 5 leaves room for both and
	// still dead-letters a poison message after about 12 minutes (4 × 180 s
	// between its 5 receives).
	ordersMaxReceiveCount = 5

	// ordersBatchSize is 10, the largest batch Lambda allows without a
	// batching window. The window stays 0: with at most 10 messages a window
	// would only add latency, and every second a message waits in a batch
	// is a second of its visibility timeout spent before processing starts.
	ordersBatchSize         = 10
	ordersMaxBatchingWindow = 0 * time.Second

	deadLetterRetentionDays = 14 // the maximum: time to look at a poisoned order
	logRetention            = awslogs.RetentionDays_ONE_WEEK

	// The payments API's stage throttle (requests per second, burst).
	paymentsAPIRateLimit  = 10
	paymentsAPIBurstLimit = 20

	lambdaServicePrincipal = "lambda.amazonaws.com"
	bootstrapHandler       = "bootstrap" // provided.al2023 runs the file named bootstrap
)

// The item-level DynamoDB actions each function performs, and nothing else:
// no Scan, Query, Batch* or DescribeTable, and never a wildcard. The
// idempotency store claims with PutItem (ALL_OLD returns a duplicate's
// record on a failed condition; a second PutItem, rare, resumes or drops a
// lapsed record's steps), completes, records steps and suspends with
// UpdateItem, releases with DeleteItem and falls back to a consistent
// GetItem only where a server does not return the old item.
var (
	idempotencyActions = []string{"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
	// The payments function appends one ledger item per payment: a
	// conditional Put in the completion's TransactWriteItems, which IAM
	// authorizes per action as PutItem (the completion in it as UpdateItem on
	// the idempotency table). There is no TransactWriteItems action.
	paymentsActions = []string{"dynamodb:PutItem"}
	// The orders function reserves stock with one Update (SET stock = stock -
	// :qty ADD reserved :qty, conditioned on stock >= :qty) in the
	// completion's TransactWriteItems, authorized as UpdateItem; a condition
	// on the written item needs no other action (only a ConditionCheck
	// action would need dynamodb:ConditionCheckItem).
	inventoryActions = []string{"dynamodb:UpdateItem"}
	// Writing to its own log group: the group exists (CloudFormation creates
	// it), so logs:CreateLogGroup is not granted.
	logActions = []string{"logs:CreateLogStream", "logs:PutLogEvents"}
)

// IdemkitStackProps configures NewIdemkitStack. The zero value of every
// field but AssetsDir is a sensible default.
type IdemkitStackProps struct {
	awscdk.StackProps

	// AssetsDir is the folder that holds one folder per function, each with
	// a single executable named bootstrap: payments/bootstrap and
	// orders/bootstrap, as `make build` writes them to build/ at the
	// repository root. Required.
	AssetsDir string

	// RetainTables keeps the three tables (and their data) when the stack is
	// deleted or a table is replaced, and turns on deletion protection. The
	// default, false, deletes them with the stack: this is a sample, its
	// data is disposable, and a retained table outlives `cdk destroy` and
	// keeps costing money (storage, point-in-time recovery) unnoticed.
	// Production stacks should set it (cdk -c retainTables=true).
	RetainTables bool

	// Architecture of both functions; nil means ARM_64 (Graviton: cheaper
	// per GB-second, and what `make build` compiles for). x86_64 is there
	// for LocalStack on hosts that cannot run arm64 containers.
	Architecture awslambda.Architecture

	// OmitHTTPAPI leaves out the HTTP API (and the ApiUrl output), for
	// LocalStack's free image: it has no API Gateway v2. The payments
	// function is then invoked directly with an HTTP API v2 event.
	OmitHTTPAPI bool
}

// NewIdemkitStack defines the sample stack: the idempotency, payments and
// inventory tables, the payments function behind an HTTP API, the orders
// function behind an SQS queue with a dead-letter queue, a least-privilege
// role and a one-week log group per function, and stack outputs for the API
// URL, the function names, the queue URLs and the table names.
//
// The stack is environment-agnostic (no account or region is looked up), so
// it synthesizes offline. It panics, like every CDK construct, if props is
// nil or props.AssetsDir is empty or missing.
func NewIdemkitStack(scope constructs.Construct, id string, props *IdemkitStackProps) awscdk.Stack {
	if props == nil || props.AssetsDir == "" {
		panic("infra: NewIdemkitStack needs props with AssetsDir")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &props.StackProps)

	idempotency := newTable(stack, idempotencyTable, props.RetainTables)
	payments := newTable(stack, paymentsTable, props.RetainTables)
	inventory := newTable(stack, inventoryTable, props.RetainTables)

	arch := props.Architecture
	if arch == nil {
		arch = awslambda.Architecture_ARM_64()
	}

	paymentsFn := newFunction(stack, functionSpec{
		id:          "Payments",
		asset:       filepath.Join(props.AssetsDir, "payments"),
		description: "idemkit sample: POST /payments, idempotent by Idempotency-Key",
		timeout:     paymentsTimeout,
		arch:        arch,
		tables: []tableAccess{
			{spec: idempotencyTable, table: idempotency, actions: idempotencyActions},
			{spec: paymentsTable, table: payments, actions: paymentsActions},
		},
	})

	ordersFn := newFunction(stack, functionSpec{
		id:          "Orders",
		asset:       filepath.Join(props.AssetsDir, "orders"),
		description: "idemkit sample: SQS orders consumer, idempotent per orderId",
		timeout:     ordersTimeout,
		arch:        arch,
		tables: []tableAccess{
			{spec: idempotencyTable, table: idempotency, actions: idempotencyActions},
			{spec: inventoryTable, table: inventory, actions: inventoryActions},
		},
	})

	if !props.OmitHTTPAPI {
		apiURL := newPaymentsAPI(stack, paymentsFn)
		output(stack, "ApiUrl", apiURL, "Base URL of the HTTP API; the payments route is POST {ApiUrl}payments")
	}
	queue, deadLetters := newOrdersQueue(stack, ordersFn)
	// The payments API as net/http on a Function URL (functionurl.go).
	paymentsURLFn := newPaymentsURL(stack, props.AssetsDir, arch, idempotency, payments)
	// The receipts function on the payments table's stream (receipts.go).
	receiptsFn, receiptFailures := newReceipts(stack, props.AssetsDir, arch, idempotency, payments)
	// The alarms docs/operations.md recommends, notifying one SNS topic (alarms.go).
	topic := newAlarms(stack, deadLetters, alarmedFunction{"Payments", paymentsFn}, alarmedFunction{"Orders", ordersFn},
		alarmedFunction{"PaymentsUrl", paymentsURLFn}, alarmedFunction{"Receipts", receiptsFn})
	newStreamAlarms(stack, topic, alarmedFunction{"Receipts", receiptsFn}, receiptFailures)

	output(stack, "PaymentsFunctionName", paymentsFn.FunctionName(), "Name of the payments function")
	output(stack, "OrdersFunctionName", ordersFn.FunctionName(), "Name of the orders function")
	output(stack, "QueueUrl", queue.QueueUrl(), "URL of the orders queue")
	output(stack, "DeadLetterQueueUrl", deadLetters.QueueUrl(), "URL of the orders dead-letter queue")
	for _, t := range []struct {
		spec  TableSpec
		table awsdynamodb.Table
	}{{idempotencyTable, idempotency}, {paymentsTable, payments}, {inventoryTable, inventory}} {
		output(stack, t.spec.ID+"Name", t.table.TableName(), "Name of the "+t.spec.ID+" ("+t.spec.EnvVar+")")
	}
	return stack
}

// newTable builds a table from its spec: on-demand billing, point-in-time
// recovery, TTL where the spec has one, and the removal policy of the stack.
func newTable(scope constructs.Construct, spec TableSpec, retain bool) awsdynamodb.Table {
	props := &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{
			Name: jsii.String(spec.PartitionKey),
			Type: awsdynamodb.AttributeType_STRING,
		},
		// On demand: a sample's traffic is near zero and bursty; provisioned
		// capacity would cost money while idle and throttle the bursts.
		BillingMode: awsdynamodb.BillingMode_PAY_PER_REQUEST,
		// Point-in-time recovery on every table: the ledger and inventory are
		// the data one would restore, and the idempotency records say which
		// requests already ran. It costs per GB stored, next to nothing here.
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		// See IdemkitStackProps.RetainTables for why DESTROY is the default.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	}
	if retain {
		props.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
		props.DeletionProtection = jsii.Bool(true)
	}
	if spec.TTLAttribute != "" {
		props.TimeToLiveAttribute = jsii.String(spec.TTLAttribute)
	}
	if spec.StreamView != "" {
		props.Stream = awsdynamodb.StreamViewType(spec.StreamView)
	}
	return awsdynamodb.NewTable(scope, jsii.String(spec.ID), props)
}

// functionSpec describes one sample function; the tables it lists are the
// only ones it can see (environment) and touch (IAM).
type functionSpec struct {
	id          string // construct ID prefix: Payments → PaymentsFunction, PaymentsRole, PaymentsLogs
	asset       string // folder with the bootstrap binary
	description string
	timeout     time.Duration
	arch        awslambda.Architecture
	tables      []tableAccess
}

// tableAccess is one table a function uses and the actions it performs on it.
type tableAccess struct {
	spec    TableSpec
	table   awsdynamodb.Table
	actions []string
}

// newFunction builds a function with its own role and log group. The role is
// explicit rather than CDK's default, which attaches the managed policy
// AWSLambdaBasicExecutionRole (logs:CreateLogGroup, logs:CreateLogStream and
// logs:PutLogEvents on every resource "*"); this one may only write to the
// function's own log group.
func newFunction(scope constructs.Construct, spec functionSpec) awslambda.Function {
	logs := awslogs.NewLogGroup(scope, jsii.String(spec.id+"Logs"), &awslogs.LogGroupProps{
		// One week: enough to investigate last week's duplicates, not so much
		// that a sample account accumulates log storage. The group goes with
		// the stack (records of a deleted sample are not worth keeping).
		Retention:     logRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})

	role := awsiam.NewRole(scope, jsii.String(spec.id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String(lambdaServicePrincipal), nil),
		Description: jsii.String("idemkit " + spec.id + " function: its own tables and log group only"),
	})
	allow(role, logActions, logs.LogGroupArn())

	env := map[string]*string{}
	for _, t := range spec.tables {
		env[t.spec.EnvVar] = t.table.TableName()
		allow(role, t.actions, t.table.TableArn())
	}

	return awslambda.NewFunction(scope, jsii.String(spec.id+"Function"), &awslambda.FunctionProps{
		Description:  jsii.String(spec.description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: spec.arch,
		Handler:      jsii.String(bootstrapHandler),
		Code:         awslambda.Code_FromAsset(jsii.String(spec.asset), nil),
		MemorySize:   jsii.Number(functionMemoryMB),
		Timeout:      seconds(spec.timeout),
		Role:         role,
		LogGroup:     logs,
		Environment:  &env,
		// No X-Ray tracing: its actions (xray:PutTraceSegments, …) can only
		// be granted on Resource "*", which this stack allows nowhere.
	})
}

// allow adds one Allow statement for actions on resource to role's policy.
func allow(role awsiam.Role, actions []string, resource *string) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &[]*string{resource},
	}))
}

// newPaymentsAPI puts fn behind an HTTP API route POST /payments (payload
// format 2.0, the one the HTTP API v2 adapter reads) and returns the API's
// base URL.
func newPaymentsAPI(scope constructs.Construct, fn awslambda.Function) *string {
	api := awsapigatewayv2.NewHttpApi(scope, jsii.String("PaymentsApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:     jsii.String(*awscdk.Stack_Of(scope).StackName() + "-payments"),
		Description: jsii.String("idemkit sample payments API"),
		// The $default stage is defined below, with throttling.
		CreateDefaultStage: jsii.Bool(false),
	})
	// The route has no authorizer (it is a sample): throttle the stage so
	// that a public URL cannot run up the on-demand table's bill. Without an
	// authorizer every caller shares one key scope; see README.md.
	stage := awsapigatewayv2.NewHttpStage(api, jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(paymentsAPIRateLimit),
			BurstLimit: jsii.Number(paymentsAPIBurstLimit),
		},
	})
	api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path:    jsii.String("/payments"),
		Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST},
		Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(
			jsii.String("PaymentsIntegration"), fn,
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
				PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
			}),
	})
	return stage.Url()
}

// newOrdersQueue creates the orders queue and its dead-letter queue and
// subscribes fn to the queue with partial batch responses.
func newOrdersQueue(scope constructs.Construct, fn awslambda.Function) (queue, deadLetters awssqs.Queue) {
	deadLetters = awssqs.NewQueue(scope, jsii.String("OrdersDeadLetterQueue"), &awssqs.QueueProps{
		// A standard queue's message keeps its original enqueue time in the
		// dead-letter queue, so the DLQ keeps messages as long as SQS allows.
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(deadLetterRetentionDays)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
	})
	queue = awssqs.NewQueue(scope, jsii.String("OrdersQueue"), &awssqs.QueueProps{
		VisibilityTimeout: seconds(ordersVisibilityTimeout), // 180 s = 6 × 30 s > 32 s lease; see the timing comment
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           deadLetters,
			MaxReceiveCount: jsii.Number(ordersMaxReceiveCount),
		},
	})
	fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:         jsii.Number(ordersBatchSize),
		MaxBatchingWindow: seconds(ordersMaxBatchingWindow),
		// Without ReportBatchItemFailures Lambda reads only "the invocation
		// succeeded or failed": the SQS adapter's partial batch response
		// (batchItemFailures) would be ignored, a successful invocation would
		// delete every message of the batch — including the ones that failed
		// or were still in progress elsewhere — and they would be lost
		// silently. With it, only the listed messages return to the queue.
		ReportBatchItemFailures: jsii.Bool(true),
	}))
	return queue, deadLetters
}

// output declares a stack output.
func output(scope constructs.Construct, id string, value *string, description string) {
	awscdk.NewCfnOutput(scope, jsii.String(id), &awscdk.CfnOutputProps{
		Value:       value,
		Description: jsii.String(description),
	})
}

// seconds converts d to a CDK duration in whole seconds.
func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}
