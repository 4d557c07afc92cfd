package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// placeholderAssets is a temporary assets dir with empty stand-ins for the
// bootstrap binaries: synthesizing only hashes and copies them, so the
// tests need neither `make build` nor a cross-compiler.
var placeholderAssets string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "idemkit-assets-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		for _, name := range functionAssets {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			stub := []byte("#!/bin/sh\n# placeholder for the " + name + " binary (infra tests)\nexit 1\n")
			if err := os.WriteFile(filepath.Join(dir, name, "bootstrap"), stub, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		placeholderAssets = dir
		return m.Run()
	}()
	// One jsii runtime (a node process) serves every test: close it once.
	jsii.Close()
	os.Exit(code)
}

// variant is one way of configuring the stack in tests.
type variant struct {
	name   string
	retain bool
	noAPI  bool
	x86    bool
}

var (
	defaultVariant = variant{name: "default"}
	allVariants    = []variant{
		defaultVariant,
		{name: "retainTables", retain: true},
		{name: "noHttpApi", noAPI: true},
		{name: "x86_64", x86: true},
	}
)

// synthesized is one synthesized stack: the assertions.Template and its
// CloudFormation JSON.
type synthesized struct {
	template assertions.Template
	json     map[string]any
}

var synthCache = struct {
	sync.Mutex
	m map[variant]*synthesized
}{m: map[variant]*synthesized{}}

// synth synthesizes the stack for v once per test binary; synthesizing
// through jsii costs about a second.
func synth(t *testing.T, v variant) *synthesized {
	t.Helper()
	synthCache.Lock()
	defer synthCache.Unlock()
	if s, ok := synthCache.m[v]; ok {
		return s
	}
	// The app gets cdk.json's context (feature flags), as under `cdk synth`,
	// so the tests see the template that would be deployed.
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t)})
	props := &IdemkitStackProps{AssetsDir: placeholderAssets, RetainTables: v.retain, OmitHTTPAPI: v.noAPI}
	if v.x86 {
		props.Architecture = awslambda.Architecture_X86_64()
	}
	stack := NewIdemkitStack(app, stackName, props)
	tpl := assertions.Template_FromStack(stack, nil)
	s := &synthesized{template: tpl, json: *tpl.ToJSON()}
	synthCache.m[v] = s
	return s
}

// cdkContext reads the "context" object of cdk.json.
func cdkContext(t *testing.T) *map[string]any {
	t.Helper()
	raw, err := os.ReadFile("cdk.json")
	require.NoError(t, err)
	var cfg struct {
		App     string         `json:"app"`
		Context map[string]any `json:"context"`
	}
	require.NoError(t, json.Unmarshal(raw, &cfg))
	require.Equal(t, "go run .", cfg.App)
	return &cfg.Context
}

// check runs an assertions.Template method, which panics (through jsii)
// when the assertion fails, and turns the panic into a test failure.
func check(t *testing.T, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("template assertion failed: %v", r)
		}
	}()
	assertion()
}

// resources returns the template's resources of type typ by logical ID.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// resource returns the one resource of type typ whose logical ID starts
// with the construct ID prefix (CDK appends a hash), and its logical ID.
func (s *synthesized) resource(t *testing.T, typ, prefix string) (string, map[string]any) {
	t.Helper()
	var ids []string
	for id := range s.resources(typ) {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, 1, "%s resources named %s*: %v", typ, prefix, ids)
	return ids[0], s.resources(typ)[ids[0]]
}

// props returns the Properties of the one resource resource(t, typ, prefix).
func (s *synthesized) props(t *testing.T, typ, prefix string) map[string]any {
	t.Helper()
	_, r := s.resource(t, typ, prefix)
	return r["Properties"].(map[string]any)
}

// logicalID returns the logical ID of resource(t, typ, prefix).
func (s *synthesized) logicalID(t *testing.T, typ, prefix string) string {
	t.Helper()
	id, _ := s.resource(t, typ, prefix)
	return id
}

func ref(id string) map[string]any    { return map[string]any{"Ref": id} }
func getAtt(id string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, "Arn"}} }

func TestResourceCounts(t *testing.T) {
	counts := map[string]int{
		"AWS::DynamoDB::Table":            3,
		"AWS::Lambda::Function":           4, // payments, orders, the Function URL sample (functionurl_test.go), receipts
		"AWS::Lambda::Url":                1,
		"AWS::Logs::LogGroup":             4,
		"AWS::IAM::Role":                  4,
		"AWS::IAM::Policy":                4,
		"AWS::SQS::Queue":                 3, // orders, its dead-letter queue, the receipts on-failure queue
		"AWS::Lambda::EventSourceMapping": 2, // orders queue, payments table stream
		"AWS::ApiGatewayV2::Api":          1,
		"AWS::ApiGatewayV2::Stage":        1,
		"AWS::ApiGatewayV2::Route":        1,
		"AWS::ApiGatewayV2::Integration":  1,
		"AWS::Lambda::Permission":         1, // API Gateway may invoke payments
		"AWS::IAM::ManagedPolicy":         0,
		"AWS::SQS::QueuePolicy":           0,
		"Custom::LogRetention":            0,  // retention is on the LogGroup itself
		"AWS::CloudWatch::Alarm":          20, // 4 outcome alarms × 4 functions + the DLQ + 3 of the stream consumer (alarms_test.go)
		"AWS::SNS::Topic":                 1,  // the alarm topic
	}
	withoutAPI := map[string]int{}
	for typ, n := range counts {
		if strings.HasPrefix(typ, "AWS::ApiGatewayV2::") || typ == "AWS::Lambda::Permission" {
			n = 0
		}
		withoutAPI[typ] = n
	}

	tests := []struct {
		v    variant
		want map[string]int
	}{
		{defaultVariant, counts},
		{variant{name: "noHttpApi", noAPI: true}, withoutAPI},
	}
	for _, tt := range tests {
		t.Run(tt.v.name, func(t *testing.T) {
			s := synth(t, tt.v)
			total := 0
			for typ, n := range tt.want {
				check(t, func() { s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
				total += n
			}
			// Nothing beyond the resources listed above.
			assert.Equal(t, total, len(s.json["Resources"].(map[string]any)), "number of resources")
		})
	}
}

func TestTables(t *testing.T) {
	s := synth(t, defaultVariant)
	require.Len(t, Tables(), 3)
	for _, spec := range Tables() {
		t.Run(spec.ID, func(t *testing.T) {
			id, table := s.resource(t, "AWS::DynamoDB::Table", spec.ID)
			p := table["Properties"].(map[string]any)

			assert.Equal(t, []any{map[string]any{"AttributeName": spec.PartitionKey, "KeyType": "HASH"}}, p["KeySchema"])
			assert.Equal(t, []any{map[string]any{"AttributeName": spec.PartitionKey, "AttributeType": "S"}}, p["AttributeDefinitions"])
			assert.Equal(t, "PAY_PER_REQUEST", p["BillingMode"])
			assert.Equal(t, map[string]any{"PointInTimeRecoveryEnabled": true}, p["PointInTimeRecoverySpecification"])
			if spec.TTLAttribute == "" {
				assert.NotContains(t, p, "TimeToLiveSpecification")
			} else {
				assert.Equal(t, map[string]any{"AttributeName": spec.TTLAttribute, "Enabled": true}, p["TimeToLiveSpecification"])
			}
			// CloudFormation names the tables; no fixed name, no secondary
			// indexes (the grants cover the table ARN only).
			for _, key := range []string{"TableName", "GlobalSecondaryIndexes", "LocalSecondaryIndexes", "ProvisionedThroughput"} {
				assert.NotContains(t, p, key)
			}
			// A stream only where a consumer reads it (the payments ledger).
			if spec.StreamView == "" {
				assert.NotContains(t, p, "StreamSpecification")
			} else {
				assert.Equal(t, map[string]any{"StreamViewType": spec.StreamView}, p["StreamSpecification"])
			}
			assert.Equal(t, ref(id), s.json["Outputs"].(map[string]any)[spec.ID+"Name"].(map[string]any)["Value"])
		})
	}
	t.Run("the payments table streams new and old images", func(t *testing.T) {
		assert.Equal(t, "NEW_AND_OLD_IMAGES", paymentsTable.StreamView, "the receipts function needs the new image")
	})
	t.Run("idempotency table is the Powertools layout", func(t *testing.T) {
		check(t, func() {
			s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
				"KeySchema":               []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}},
				"TimeToLiveSpecification": map[string]any{"AttributeName": "expiration", "Enabled": true},
			})
		})
	})
}

func TestTableRemovalPolicy(t *testing.T) {
	tests := []struct {
		v                  variant
		wantPolicy         string
		deletionProtection bool
	}{
		{defaultVariant, "Delete", false},
		{variant{name: "retainTables", retain: true}, "Retain", true},
	}
	for _, tt := range tests {
		t.Run(tt.v.name, func(t *testing.T) {
			s := synth(t, tt.v)
			for _, spec := range Tables() {
				_, table := s.resource(t, "AWS::DynamoDB::Table", spec.ID)
				assert.Equal(t, tt.wantPolicy, table["DeletionPolicy"], spec.ID)
				assert.Equal(t, tt.wantPolicy, table["UpdateReplacePolicy"], spec.ID)
				p := table["Properties"].(map[string]any)
				if tt.deletionProtection {
					assert.Equal(t, true, p["DeletionProtectionEnabled"], spec.ID)
				} else {
					assert.NotContains(t, p, "DeletionProtectionEnabled", spec.ID)
				}
			}
			// Log groups and queues always go with the stack.
			for _, typ := range []string{"AWS::Logs::LogGroup", "AWS::SQS::Queue"} {
				for id, r := range s.resources(typ) {
					assert.Equal(t, "Delete", r["DeletionPolicy"], id)
				}
			}
		})
	}
}

// functionCase is what the tests expect of one function.
type functionCase struct {
	id       string // construct ID prefix
	timeout  float64
	tables   []TableSpec
	policies func(s *synthesized, t *testing.T) map[string][]string // resource logical ID → actions
}

func functionCases() []functionCase {
	return []functionCase{
		{
			id:      "Payments",
			timeout: 10,
			tables:  []TableSpec{idempotencyTable, paymentsTable},
			policies: func(s *synthesized, t *testing.T) map[string][]string {
				return map[string][]string{
					s.logicalID(t, "AWS::Logs::LogGroup", "PaymentsLogs"):   {"logs:CreateLogStream", "logs:PutLogEvents"},
					s.logicalID(t, "AWS::DynamoDB::Table", "Idempotency"):   {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
					s.logicalID(t, "AWS::DynamoDB::Table", "PaymentsTable"): {"dynamodb:PutItem"},
				}
			},
		},
		{
			id:      "Orders",
			timeout: 30,
			tables:  []TableSpec{idempotencyTable, inventoryTable},
			policies: func(s *synthesized, t *testing.T) map[string][]string {
				return map[string][]string{
					s.logicalID(t, "AWS::Logs::LogGroup", "OrdersLogs"):      {"logs:CreateLogStream", "logs:PutLogEvents"},
					s.logicalID(t, "AWS::DynamoDB::Table", "Idempotency"):    {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
					s.logicalID(t, "AWS::DynamoDB::Table", "InventoryTable"): {"dynamodb:UpdateItem"},
					// From the SQS event source (queue.grantConsumeMessages).
					s.logicalID(t, "AWS::SQS::Queue", "OrdersQueue"): {
						"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
						"sqs:GetQueueUrl", "sqs:ReceiveMessage",
					},
				}
			},
		},
		{
			id:      "Receipts",
			timeout: 30,
			tables:  []TableSpec{idempotencyTable},
			policies: func(s *synthesized, t *testing.T) map[string][]string {
				return map[string][]string{
					s.logicalID(t, "AWS::Logs::LogGroup", "ReceiptsLogs"): {"logs:CreateLogStream", "logs:PutLogEvents"},
					s.logicalID(t, "AWS::DynamoDB::Table", "Idempotency"): {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
					// From the event source mapping: the payments table's
					// stream (table.grantStreamRead), nothing of the table itself.
					s.logicalID(t, "AWS::DynamoDB::Table", "PaymentsTable") + ".StreamArn": {
						"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator",
					},
					// ListStreams cannot be scoped (IAM: it supports no
					// resource type), and Lambda checks it when it creates
					// the mapping. It lists stream ARNs, no data.
					"*": {"dynamodb:ListStreams"},
					// The on-failure destination (queue.grantSendMessages).
					s.logicalID(t, "AWS::SQS::Queue", "ReceiptsFailureQueue"): {
						"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage",
					},
				}
			},
		},
	}
}

func TestFunctions(t *testing.T) {
	s := synth(t, defaultVariant)
	for _, fc := range functionCases() {
		t.Run(fc.id, func(t *testing.T) {
			p := s.props(t, "AWS::Lambda::Function", fc.id+"Function")
			assert.Equal(t, "provided.al2023", p["Runtime"])
			assert.Equal(t, []any{"arm64"}, p["Architectures"])
			assert.Equal(t, "bootstrap", p["Handler"])
			assert.Equal(t, float64(256), p["MemorySize"])
			assert.Equal(t, fc.timeout, p["Timeout"])
			assert.NotContains(t, p, "TracingConfig")

			// Exactly the tables the function uses, nothing else.
			wantEnv := map[string]any{}
			for _, spec := range fc.tables {
				wantEnv[spec.EnvVar] = ref(s.logicalID(t, "AWS::DynamoDB::Table", spec.ID))
			}
			assert.Equal(t, map[string]any{"Variables": wantEnv}, p["Environment"])

			// Its own log group, kept one week.
			logsID, logs := s.resource(t, "AWS::Logs::LogGroup", fc.id+"Logs")
			assert.Equal(t, map[string]any{"LogGroup": ref(logsID)}, p["LoggingConfig"])
			assert.Equal(t, float64(7), logs["Properties"].(map[string]any)["RetentionInDays"])

			// Its own role.
			assert.Equal(t, getAtt(s.logicalID(t, "AWS::IAM::Role", fc.id+"Role")), p["Role"])
		})
	}
}

func TestArchitectureOverride(t *testing.T) {
	s := synth(t, variant{name: "x86_64", x86: true})
	for _, fc := range functionCases() {
		p := s.props(t, "AWS::Lambda::Function", fc.id+"Function")
		assert.Equal(t, []any{"x86_64"}, p["Architectures"], fc.id)
	}
}

func TestFunctionPolicies(t *testing.T) {
	s := synth(t, defaultVariant)
	for _, fc := range functionCases() {
		t.Run(fc.id, func(t *testing.T) {
			roleID, role := s.resource(t, "AWS::IAM::Role", fc.id+"Role")
			rp := role["Properties"].(map[string]any)
			assert.NotContains(t, rp, "ManagedPolicyArns", "no AWSLambdaBasicExecutionRole: logs are granted on the function's own group")
			assert.NotContains(t, rp, "Policies", "inline policies would escape this test")
			assert.Equal(t, map[string]any{
				"Version": "2012-10-17",
				"Statement": []any{map[string]any{
					"Action":    "sts:AssumeRole",
					"Effect":    "Allow",
					"Principal": map[string]any{"Service": "lambda.amazonaws.com"},
				}},
			}, rp["AssumeRolePolicyDocument"])

			got := map[string][]string{}
			for policyID, policy := range s.resources("AWS::IAM::Policy") {
				pp := policy["Properties"].(map[string]any)
				if !slices.ContainsFunc(pp["Roles"].([]any), func(r any) bool { return assert.ObjectsAreEqual(ref(roleID), r) }) {
					continue
				}
				for _, st := range statements(pp["PolicyDocument"]) {
					require.Equal(t, "Allow", st["Effect"], policyID)
					require.NotContains(t, st, "Condition", policyID)
					for _, res := range asList(st["Resource"]) {
						// A resource of this stack ("ID", or "ID.StreamArn"
						// for a table's stream), or "*" where the wanted list
						// says so.
						name, _ := res.(string)
						if m, ok := res.(map[string]any); ok {
							target, ok := m["Fn::GetAtt"].([]any)
							require.True(t, ok, "%s: resource %v is not a resource of this stack", policyID, res)
							name = target[0].(string)
							if target[1] != "Arn" {
								name += "." + target[1].(string)
							}
						}
						for _, a := range asList(st["Action"]) {
							got[name] = append(got[name], a.(string))
						}
					}
				}
			}
			for id := range got {
				slices.Sort(got[id])
			}
			assert.Equal(t, fc.policies(s, t), got)
		})
	}
}

// statements returns the statements of a policy document.
func statements(doc any) []map[string]any {
	var out []map[string]any
	for _, st := range asList(doc.(map[string]any)["Statement"]) {
		out = append(out, st.(map[string]any))
	}
	return out
}

// asList returns v as a list: IAM accepts a single value or a list.
func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// wildcardProblems walks every policy document anywhere in a template (any
// object with a Statement list: IAM policies, roles' trust and inline
// policies, resource policies) and describes each statement that uses a
// wildcard action, a "*" resource or principal, or a Not* element.
func wildcardProblems(tpl map[string]any) (problems []string, seen int) {
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if sts, ok := v["Statement"]; ok {
				for i, st := range asList(sts) {
					seen++
					where := fmt.Sprintf("%s.Statement[%d]", path, i)
					m, _ := st.(map[string]any)
					for _, not := range []string{"NotAction", "NotResource", "NotPrincipal"} {
						if _, ok := m[not]; ok {
							problems = append(problems, where+" uses "+not)
						}
					}
					for _, a := range asList(m["Action"]) {
						if s, ok := a.(string); !ok || strings.Contains(s, "*") {
							problems = append(problems, fmt.Sprintf("%s: action %v", where, a))
						}
					}
					for _, r := range asList(m["Resource"]) {
						if r == "*" {
							problems = append(problems, where+": resource *")
						}
					}
					if p := m["Principal"]; p == "*" || assert.ObjectsAreEqual(map[string]any{"AWS": "*"}, p) {
						problems = append(problems, where+": principal *")
					}
				}
			}
			for k, child := range v {
				walk(path+"."+k, child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), child)
			}
		}
	}
	walk("", tpl)
	slices.Sort(problems)
	return problems, seen
}

func TestNoWildcardsInIAM(t *testing.T) {
	for _, v := range allVariants {
		t.Run(v.name, func(t *testing.T) {
			problems, seen := wildcardProblems(synth(t, v).json)
			// The one exception: dynamodb:ListStreams alone on "*", which
			// cannot be scoped and which Lambda requires of a DynamoDB
			// Streams consumer (TestFunctionPolicies pins it to the
			// receipts role).
			var listStreams int
			problems = slices.DeleteFunc(problems, func(p string) bool {
				if strings.HasPrefix(p, ".Resources.ReceiptsRoleDefaultPolicy") && strings.HasSuffix(p, ": resource *") {
					listStreams++
					return true
				}
				return false
			})
			assert.Empty(t, problems)
			assert.Equal(t, 1, listStreams, "one ListStreams statement on *")
			// 2 trust policies + 3 statements (payments) + 4 (orders):
			// the walk did find the documents.
			assert.GreaterOrEqual(t, seen, 9)
		})
	}
}

func TestWildcardProblemsFindsWildcards(t *testing.T) {
	tpl := map[string]any{"Resources": map[string]any{"Bad": map[string]any{
		"Type": "AWS::IAM::Policy",
		"Properties": map[string]any{"PolicyDocument": map[string]any{"Statement": []any{
			map[string]any{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "arn:aws:dynamodb:::table/t"},
			map[string]any{"Effect": "Allow", "Action": []any{"dynamodb:GetItem", "dynamodb:BatchGet*"}, "Resource": "*"},
			map[string]any{"Effect": "Allow", "NotAction": "s3:GetObject", "Resource": []any{"*"}},
			map[string]any{"Effect": "Allow", "Action": "*", "Principal": "*"},
			map[string]any{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": map[string]any{"Ref": "T"}},
		}}},
	}}}
	problems, seen := wildcardProblems(tpl)
	assert.Equal(t, 5, seen)
	assert.Equal(t, []string{
		".Resources.Bad.Properties.PolicyDocument.Statement[0]: action dynamodb:*",
		".Resources.Bad.Properties.PolicyDocument.Statement[1]: action dynamodb:BatchGet*",
		".Resources.Bad.Properties.PolicyDocument.Statement[1]: resource *",
		".Resources.Bad.Properties.PolicyDocument.Statement[2] uses NotAction",
		".Resources.Bad.Properties.PolicyDocument.Statement[2]: resource *",
		".Resources.Bad.Properties.PolicyDocument.Statement[3]: action *",
		".Resources.Bad.Properties.PolicyDocument.Statement[3]: principal *",
	}, problems)
}

func TestOrdersQueue(t *testing.T) {
	s := synth(t, defaultVariant)
	queue := s.props(t, "AWS::SQS::Queue", "OrdersQueue")
	dlqID, dlq := s.resource(t, "AWS::SQS::Queue", "OrdersDeadLetterQueue")

	assert.Equal(t, map[string]any{
		"deadLetterTargetArn": getAtt(dlqID),
		"maxReceiveCount":     float64(5),
	}, queue["RedrivePolicy"])
	assert.Equal(t, true, queue["SqsManagedSseEnabled"])
	assert.NotContains(t, queue, "FifoQueue")

	dp := dlq["Properties"].(map[string]any)
	assert.Equal(t, float64(14*24*60*60), dp["MessageRetentionPeriod"])
	assert.Equal(t, true, dp["SqsManagedSseEnabled"])
	assert.NotContains(t, dp, "RedrivePolicy")

	t.Run("visibility timeout", func(t *testing.T) {
		visibility := queue["VisibilityTimeout"].(float64)
		timeout := s.props(t, "AWS::Lambda::Function", "OrdersFunction")["Timeout"].(float64)
		lease := timeout + clockSkewMargin.Seconds()
		assert.Equal(t, float64(180), visibility)
		assert.GreaterOrEqual(t, visibility, 6*timeout, "AWS: visibility timeout ≥ 6 × function timeout")
		// The key may be found in progress up to a whole invocation after the
		// message was received, and the other owner's lease may run a full
		// lease beyond that.
		assert.Greater(t, visibility, timeout+lease, "a message must not reappear while the lease it met may be live")
	})
}

func TestOrdersEventSource(t *testing.T) {
	s := synth(t, defaultVariant)
	p := s.props(t, "AWS::Lambda::EventSourceMapping", "OrdersFunction")
	assert.Equal(t, map[string]any{
		"BatchSize":                      float64(10),
		"MaximumBatchingWindowInSeconds": float64(0),
		"EventSourceArn":                 getAtt(s.logicalID(t, "AWS::SQS::Queue", "OrdersQueue")),
		"FunctionName":                   ref(s.logicalID(t, "AWS::Lambda::Function", "OrdersFunction")),
		// Without it, a batch's failed messages are deleted with the rest.
		"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
	}, p)
	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionResponseTypes": assertions.Match_ArrayWith(&[]any{"ReportBatchItemFailures"}),
		})
	})
}

// TestReceiptsEventSource: the payments table's stream feeds the receipts
// function with partial batch responses, bisect on error, bounded retries
// and record age, an on-failure queue, from TRIM_HORIZON, INSERTs only.
func TestReceiptsEventSource(t *testing.T) {
	s := synth(t, defaultVariant)
	p := s.props(t, "AWS::Lambda::EventSourceMapping", "ReceiptsFunction")
	assert.Equal(t, map[string]any{
		"EventSourceArn": map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::DynamoDB::Table", "PaymentsTable"), "StreamArn"}},
		"FunctionName":   ref(s.logicalID(t, "AWS::Lambda::Function", "ReceiptsFunction")),
		// Without it, the function's partial batch response is ignored and
		// the shard is checkpointed past the failed records: lost receipts.
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		"BisectBatchOnFunctionError": true,
		"MaximumRetryAttempts":       float64(10),
		"MaximumRecordAgeInSeconds":  float64(6 * 60 * 60),
		"DestinationConfig": map[string]any{"OnFailure": map[string]any{
			"Destination": getAtt(s.logicalID(t, "AWS::SQS::Queue", "ReceiptsFailureQueue")),
		}},
		"StartingPosition": "TRIM_HORIZON",
		"BatchSize":        float64(20),
		"FilterCriteria":   map[string]any{"Filters": []any{map[string]any{"Pattern": `{"eventName":["INSERT"]}`}}},
	}, p)

	t.Run("bounds", func(t *testing.T) {
		// Retries and record age are bounded (-1, the default, retries a
		// poison record until it leaves the stream, blocking its shard),
		// and the age stays below the stream's 24 h retention, so the
		// records the on-failure queue describes can still be read.
		assert.Positive(t, p["MaximumRetryAttempts"])
		assert.Less(t, p["MaximumRecordAgeInSeconds"], float64(24*60*60))
		// A batch fits the function's time many times over.
		timeout := s.props(t, "AWS::Lambda::Function", "ReceiptsFunction")["Timeout"].(float64)
		assert.Equal(t, float64(30), timeout)
	})

	queue := s.props(t, "AWS::SQS::Queue", "ReceiptsFailureQueue")
	assert.Equal(t, map[string]any{"MessageRetentionPeriod": float64(14 * 24 * 60 * 60), "SqsManagedSseEnabled": true}, queue)
}

func TestPaymentsAPI(t *testing.T) {
	s := synth(t, defaultVariant)
	apiID := s.logicalID(t, "AWS::ApiGatewayV2::Api", "PaymentsApi")
	fnID := s.logicalID(t, "AWS::Lambda::Function", "PaymentsFunction")
	integrationID, integration := s.resource(t, "AWS::ApiGatewayV2::Integration", "PaymentsApi")

	assert.Equal(t, map[string]any{
		"ApiId":                ref(apiID),
		"IntegrationType":      "AWS_PROXY",
		"IntegrationUri":       getAtt(fnID),
		"PayloadFormatVersion": "2.0",
	}, integration["Properties"])

	route := s.props(t, "AWS::ApiGatewayV2::Route", "PaymentsApi")
	assert.Equal(t, "POST /payments", route["RouteKey"])
	assert.Equal(t, map[string]any{"Fn::Join": []any{"", []any{"integrations/", ref(integrationID)}}}, route["Target"])

	stage := s.props(t, "AWS::ApiGatewayV2::Stage", "PaymentsApi")
	assert.Equal(t, "$default", stage["StageName"])
	assert.Equal(t, true, stage["AutoDeploy"])
	assert.Equal(t, map[string]any{"ThrottlingRateLimit": float64(10), "ThrottlingBurstLimit": float64(20)}, stage["DefaultRouteSettings"])

	permission := s.props(t, "AWS::Lambda::Permission", "PaymentsApi")
	assert.Equal(t, "lambda:InvokeFunction", permission["Action"])
	assert.Equal(t, "apigateway.amazonaws.com", permission["Principal"])
	assert.Equal(t, getAtt(fnID), permission["FunctionName"])

	check(t, func() {
		s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{"RouteKey": "POST /payments"})
	})
}

func TestOutputs(t *testing.T) {
	common := []string{
		"PaymentsFunctionName", "OrdersFunctionName", "QueueUrl", "DeadLetterQueueUrl",
		"IdempotencyTableName", "PaymentsTableName", "InventoryTableName",
		"PaymentsFunctionUrl", "PaymentsUrlFunctionName", "AlarmTopicArn",
		"ReceiptsFunctionName", "ReceiptsFailureQueueUrl",
	}
	tests := []struct {
		v    variant
		want []string
	}{
		{defaultVariant, append([]string{"ApiUrl"}, common...)},
		{variant{name: "noHttpApi", noAPI: true}, common},
	}
	for _, tt := range tests {
		t.Run(tt.v.name, func(t *testing.T) {
			s := synth(t, tt.v)
			outputs := s.json["Outputs"].(map[string]any)
			var got []string
			for name := range outputs {
				got = append(got, name)
			}
			assert.ElementsMatch(t, tt.want, got)
			assert.Equal(t, ref(s.logicalID(t, "AWS::SQS::Queue", "OrdersQueue")), outputs["QueueUrl"].(map[string]any)["Value"])
			if !tt.v.noAPI {
				url, err := json.Marshal(outputs["ApiUrl"].(map[string]any)["Value"])
				require.NoError(t, err)
				assert.Contains(t, string(url), `"https://"`)
				assert.Contains(t, string(url), s.logicalID(t, "AWS::ApiGatewayV2::Api", "PaymentsApi"))
			}
		})
	}
}

func TestNewIdemkitStackNeedsAssetsDir(t *testing.T) {
	for _, props := range []*IdemkitStackProps{nil, {}} {
		assert.PanicsWithValue(t, "infra: NewIdemkitStack needs props with AssetsDir", func() {
			NewIdemkitStack(awscdk.NewApp(nil), stackName, props)
		})
	}
}
