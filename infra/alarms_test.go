package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutcomeAlarms: for each sample function, one alarm per recommended EMF
// metric, on the namespace and dimension package emf writes, notifying the
// alarm topic and quiet when the metric is absent.
func TestOutcomeAlarms(t *testing.T) {
	s := synth(t, defaultVariant)
	topicID := s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")
	for _, fn := range []string{"Payments", "Orders", "PaymentsUrl", "Receipts"} {
		fnID := s.logicalID(t, "AWS::Lambda::Function", fn+"Function")
		for _, a := range outcomeAlarms {
			t.Run(fn+"/"+a.metric, func(t *testing.T) {
				p := s.props(t, "AWS::CloudWatch::Alarm", fn+a.id+"Alarm")
				assert.Equal(t, emfNamespace, p["Namespace"])
				assert.Equal(t, a.metric, p["MetricName"])
				assert.Equal(t, []any{map[string]any{"Name": "FunctionName", "Value": ref(fnID)}}, p["Dimensions"])
				assert.Equal(t, "Sum", p["Statistic"])
				assert.EqualValues(t, 300, p["Period"])
				assert.EqualValues(t, 0, p["Threshold"])
				assert.Equal(t, "GreaterThanThreshold", p["ComparisonOperator"])
				assert.EqualValues(t, 1, p["EvaluationPeriods"])
				assert.Equal(t, "notBreaching", p["TreatMissingData"])
				assert.Equal(t, []any{ref(topicID)}, p["AlarmActions"])
				assert.Contains(t, p["AlarmDescription"], "Runbook: docs/operations.md#"+a.anchor)
			})
		}
	}
}

func TestDeadLetterAlarm(t *testing.T) {
	s := synth(t, defaultVariant)
	topicID := s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")
	dlqID := s.logicalID(t, "AWS::SQS::Queue", "OrdersDeadLetterQueue")
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"Namespace":          "AWS/SQS",
			"MetricName":         "ApproximateNumberOfMessagesVisible",
			"Dimensions":         []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{dlqID, "QueueName"}}}},
			"Statistic":          "Maximum",
			"Threshold":          0,
			"ComparisonOperator": "GreaterThanThreshold",
			"AlarmActions":       []any{ref(topicID)},
		})
	})
	p := s.props(t, "AWS::CloudWatch::Alarm", "OrdersDeadLetterAlarm")
	assert.Contains(t, p["AlarmDescription"], "Runbook: docs/operations.md#"+deadLetterAnchor)
}

// TestStreamAlarms: the receipts function's own alarms: invocations that
// failed as a whole, the iterator age (a stuck shard), and the on-failure
// queue's depth (receipts never sent).
func TestStreamAlarms(t *testing.T) {
	s := synth(t, defaultVariant)
	topicID := s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")
	fnID := s.logicalID(t, "AWS::Lambda::Function", "ReceiptsFunction")
	fnDimension := []any{map[string]any{"Name": "FunctionName", "Value": ref(fnID)}}
	tests := []struct {
		id, namespace, metric, statistic string
		threshold                        float64
		dimensions                       []any
		anchor                           string
	}{
		{"ReceiptsErrorsAlarm", "AWS/Lambda", "Errors", "Sum", 0, fnDimension, "alarm-receipts-errors"},
		{"ReceiptsIteratorAgeAlarm", "AWS/Lambda", "IteratorAge", "Maximum", 5 * 60 * 1000, fnDimension, "alarm-receipts-iterator-age"},
		{"ReceiptsFailureQueueAlarm", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 0,
			[]any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "ReceiptsFailureQueue"), "QueueName"}}}},
			"alarm-receipts-on-failure-queue"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			p := s.props(t, "AWS::CloudWatch::Alarm", tt.id)
			assert.Equal(t, tt.namespace, p["Namespace"])
			assert.Equal(t, tt.metric, p["MetricName"])
			assert.Equal(t, tt.dimensions, p["Dimensions"])
			assert.Equal(t, tt.statistic, p["Statistic"])
			assert.EqualValues(t, 300, p["Period"])
			assert.EqualValues(t, tt.threshold, p["Threshold"])
			assert.Equal(t, "GreaterThanThreshold", p["ComparisonOperator"])
			assert.EqualValues(t, 1, p["EvaluationPeriods"])
			assert.Equal(t, "notBreaching", p["TreatMissingData"])
			assert.Equal(t, []any{ref(topicID)}, p["AlarmActions"])
			assert.Contains(t, p["AlarmDescription"], "Runbook: docs/operations.md#"+tt.anchor)
		})
	}
}

// TestAlarmTopic: a topic without subscriptions (the deployer's choice),
// whose ARN is an output.
func TestAlarmTopic(t *testing.T) {
	s := synth(t, defaultVariant)
	topicID := s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")
	assert.Empty(t, s.resources("AWS::SNS::Subscription"))
	outputs := s.json["Outputs"].(map[string]any)
	require.Contains(t, outputs, "AlarmTopicArn")
	assert.Equal(t, ref(topicID), outputs["AlarmTopicArn"].(map[string]any)["Value"])
}

// TestAlarmRunbookEntries: every alarm's description points to a heading of
// docs/operations.md that exists (GitHub's anchor rules: lower case, spaces
// to hyphens, punctuation other than - and _ dropped).
func TestAlarmRunbookEntries(t *testing.T) {
	raw, err := os.ReadFile("../" + runbookDoc)
	require.NoError(t, err)
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimLeft(h, "#")
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")] = true
		}
	}
	s := synth(t, defaultVariant)
	alarms := s.resources("AWS::CloudWatch::Alarm")
	require.NotEmpty(t, alarms)
	link := regexp.MustCompile(`Runbook: docs/operations\.md#(\S+)$`)
	for id, a := range alarms {
		desc, _ := a["Properties"].(map[string]any)["AlarmDescription"].(string)
		m := link.FindStringSubmatch(desc)
		if assert.NotNil(t, m, "alarm %s has no runbook link: %q", id, desc) {
			assert.True(t, anchors[m[1]], "alarm %s: no heading for #%s in %s", id, m[1], runbookDoc)
		}
	}
}
