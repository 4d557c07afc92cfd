package main

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// The alarms docs/operations.md recommends, on the EMF metrics the sample
// functions write (package emf: namespace idemkit, one dimension
// FunctionName, one Count metric per outcome) and on the dead-letter queue.
//
// Every alarm notifies one SNS topic (output AlarmTopicArn) that the stack
// creates without subscribers: an alarm with no action is only a colour in
// the console, and who should be told (an e-mail, a chat channel, a pager)
// is the deployer's choice, made with one `aws sns subscribe` and no change
// to the stack. Each alarm's description names its runbook entry.

const (
	// emfNamespace is the namespace the sample functions' emf.New(os.Stdout) writes.
	emfNamespace = "idemkit"
	// alarmPeriodMinutes is the period of every alarm (operations.md: Sum per 5 minutes).
	alarmPeriodMinutes = 5
	// runbookDoc is where each alarm's runbook entry lives, relative to the repository.
	runbookDoc = "docs/operations.md"
)

// outcomeAlarm is one alarm per function on an EMF metric: any non-zero
// Sum in a period is worth a look, and a period without the metric (the
// usual case: EMF writes a metric only when it happens) is not breaching.
type outcomeAlarm struct {
	metric  string // the EMF metric name
	id      string // construct id suffix
	anchor  string // the runbook entry's heading anchor in runbookDoc
	summary string // what a breach means
}

// outcomeAlarms are the per-function alarms, in the order of the runbook.
var outcomeAlarms = []outcomeAlarm{
	{"lease_lost", "LeaseLost", "alarm-lease_lost",
		"an invocation ran past its lease and another took its record over: the handler ran twice"},
	{"store_error", "StoreError", "alarm-store_error",
		"the idempotency table failed (throttling or an outage): requests refused or records left in progress"},
	{"not_stored", "NotStored", "alarm-not_stored",
		"a response was too large (or not serializable) to store: duplicates cannot get it"},
	{"took_over", "TookOver", "alarm-took_over",
		"an owner crashed or timed out mid-handler and a retry took its record over: the handler ran again"},
}

// deadLetterAnchor is the DLQ alarm's runbook entry.
const deadLetterAnchor = "alarm-dead-letter-queue"

// alarmedFunction is a function whose outcomes are alarmed on.
type alarmedFunction struct {
	id string // construct id prefix, such as "Payments"
	fn awslambda.Function
}

// newAlarms creates the alarm topic, the per-function outcome alarms and the
// dead-letter queue alarm, and outputs the topic's ARN.
func newAlarms(scope constructs.Construct, deadLetters awssqs.Queue, fns ...alarmedFunction) awssns.Topic {
	topic := awssns.NewTopic(scope, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("idemkit sample alarms"),
	})
	action := awscloudwatchactions.NewSnsAction(topic)
	period := awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes))

	for _, f := range fns {
		for _, a := range outcomeAlarms {
			metric := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace:     jsii.String(emfNamespace),
				MetricName:    jsii.String(a.metric),
				DimensionsMap: &map[string]*string{"FunctionName": f.fn.FunctionName()},
				Statistic:     awscloudwatch.Stats_SUM(),
				Period:        period,
			})
			alarm := metric.CreateAlarm(scope, jsii.String(f.id+a.id+"Alarm"), &awscloudwatch.CreateAlarmOptions{
				AlarmDescription:   jsii.String(fmt.Sprintf("%s: %s. Runbook: %s#%s", a.metric, a.summary, runbookDoc, a.anchor)),
				Threshold:          jsii.Number(0),
				ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
				EvaluationPeriods:  jsii.Number(1),
				TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			})
			alarm.AddAlarmAction(action)
		}
	}

	// A message in the DLQ is an order that failed maxReceiveCount times:
	// it will not be retried by itself.
	dlq := deadLetters.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
		Statistic: awscloudwatch.Stats_MAXIMUM(),
		Period:    period,
	}).CreateAlarm(scope, jsii.String("OrdersDeadLetterAlarm"), &awscloudwatch.CreateAlarmOptions{
		AlarmDescription: jsii.String(fmt.Sprintf("orders dead-letter queue: messages that failed every delivery wait there, "+
			"unprocessed. Runbook: %s#%s", runbookDoc, deadLetterAnchor)),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(1),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	dlq.AddAlarmAction(action)

	output(scope, "AlarmTopicArn", topic.TopicArn(), "SNS topic every alarm notifies; subscribe to it to be told")
	return topic
}

// streamAlarm is one alarm of a stream consumer on a metric Lambda or SQS
// publishes.
type streamAlarm struct {
	id        string // construct id suffix
	anchor    string // the runbook entry's heading anchor in runbookDoc
	summary   string // what a breach means
	threshold float64
	metric    awscloudwatch.Metric
}

// receiptsIteratorAgeThreshold is how far behind the stream the receipts
// function may fall before someone is told: five minutes of a 24 h stream,
// reached only when a shard is stuck retrying a record or the function
// cannot keep up.
const receiptsIteratorAgeThreshold = 5 * time.Minute

// newStreamAlarms creates the alarms of a DynamoDB Streams consumer, next to
// its outcome alarms (newAlarms): invocations that failed as a whole (the
// wrapper never returns an error, so these are timeouts and crashes), the
// age of the oldest record of the last batch (a stuck shard), and batches
// sent to the on-failure queue (records never processed).
func newStreamAlarms(scope constructs.Construct, topic awssns.Topic, f alarmedFunction, failures awssqs.Queue) {
	action := awscloudwatchactions.NewSnsAction(topic)
	period := awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes))
	alarms := []streamAlarm{
		{"ErrorsAlarm", "alarm-receipts-errors",
			"invocations failed as a whole (a timeout or crash): their batch comes back, bisected", 0,
			f.fn.MetricErrors(&awscloudwatch.MetricOptions{Statistic: awscloudwatch.Stats_SUM(), Period: period})},
		{"IteratorAgeAlarm", "alarm-receipts-iterator-age",
			fmt.Sprintf("the stream's records wait more than %s: a shard is stuck retrying a record, or the function falls behind", receiptsIteratorAgeThreshold),
			float64(receiptsIteratorAgeThreshold.Milliseconds()),
			f.fn.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Statistic: awscloudwatch.Stats_MAXIMUM(), Period: period})},
		{"FailureQueueAlarm", "alarm-receipts-on-failure-queue",
			"stream batches failed every retry (or grew too old): their receipts were not sent", 0,
			failures.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: awscloudwatch.Stats_MAXIMUM(), Period: period})},
	}
	for _, a := range alarms {
		alarm := a.metric.CreateAlarm(scope, jsii.String(f.id+a.id), &awscloudwatch.CreateAlarmOptions{
			AlarmDescription:   jsii.String(fmt.Sprintf("%s: %s. Runbook: %s#%s", f.id, a.summary, runbookDoc, a.anchor)),
			Threshold:          jsii.Number(a.threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(1),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		alarm.AddAlarmAction(action)
	}
}
