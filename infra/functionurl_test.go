package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPaymentsFunctionURL: the net/http payments sample on a Function URL
// with IAM auth and the invoke mode lambdaurl needs, in every variant
// (LocalStack's too: it has no HTTP API, but serves Function URLs).
func TestPaymentsFunctionURL(t *testing.T) {
	for _, v := range allVariants {
		t.Run(v.name, func(t *testing.T) {
			s := synth(t, v)
			fnID := s.logicalID(t, "AWS::Lambda::Function", "PaymentsUrlFunction")
			urlID, url := s.resource(t, "AWS::Lambda::Url", "PaymentsUrlFunction")
			assert.Equal(t, map[string]any{
				"AuthType":          "AWS_IAM",
				"InvokeMode":        "RESPONSE_STREAM",
				"TargetFunctionArn": getAtt(fnID),
			}, url["Properties"], "IAM auth, streaming (lambdaurl), no CORS, the unqualified function")

			// IAM auth needs no resource policy: no permission opens the
			// function to anyone (CDK adds one for auth type NONE).
			for id, perm := range s.resources("AWS::Lambda::Permission") {
				p := perm["Properties"].(map[string]any)
				assert.NotEqual(t, getAtt(fnID), p["FunctionName"], "permission %s on the Function URL sample", id)
				assert.NotContains(t, p, "FunctionUrlAuthType", id)
			}
			check(t, func() {
				s.template.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{"AuthType": "AWS_IAM"})
			})

			outputs := s.json["Outputs"].(map[string]any)
			assert.Equal(t, map[string]any{"Fn::GetAtt": []any{urlID, "FunctionUrl"}}, outputs["PaymentsFunctionUrl"].(map[string]any)["Value"])
			assert.Equal(t, ref(fnID), outputs["PaymentsUrlFunctionName"].(map[string]any)["Value"])
		})
	}
}

// TestPaymentsURLFunction: the function itself is the payments function's
// twin: same runtime, size, timeout (so the same lease arithmetic), tables
// and nothing more, its own role and log group.
func TestPaymentsURLFunction(t *testing.T) {
	s := synth(t, defaultVariant)
	p := s.props(t, "AWS::Lambda::Function", "PaymentsUrlFunction")
	twin := s.props(t, "AWS::Lambda::Function", "PaymentsFunction")
	for _, k := range []string{"Runtime", "Architectures", "Handler", "MemorySize", "Timeout"} {
		assert.Equal(t, twin[k], p[k], k)
	}
	assert.Equal(t, float64(paymentsTimeout.Seconds()), p["Timeout"])
	assert.Equal(t, map[string]any{"Variables": map[string]any{
		idempotencyTable.EnvVar: ref(s.logicalID(t, "AWS::DynamoDB::Table", idempotencyTable.ID)),
		paymentsTable.EnvVar:    ref(s.logicalID(t, "AWS::DynamoDB::Table", paymentsTable.ID)),
	}}, p["Environment"], "IDEMPOTENCY_TABLE and PAYMENTS_TABLE, as functions/payments/cmd/url reads them")
	assert.NotContains(t, p, "TracingConfig")

	logsID, logs := s.resource(t, "AWS::Logs::LogGroup", "PaymentsUrlLogs")
	assert.Equal(t, map[string]any{"LogGroup": ref(logsID)}, p["LoggingConfig"])
	assert.Equal(t, float64(7), logs["Properties"].(map[string]any)["RetentionInDays"])
	assert.Equal(t, getAtt(s.logicalID(t, "AWS::IAM::Role", "PaymentsUrlRole")), p["Role"])
	assert.NotEqual(t, twin["Role"], p["Role"], "a role of its own")
}

// TestPaymentsURLPolicy: least privilege, statement by statement: the
// store's item-level actions on the idempotency table, PutItem on the
// ledger, and writing to its own log group. Nothing else, no wildcard.
func TestPaymentsURLPolicy(t *testing.T) {
	s := synth(t, defaultVariant)
	roleID, role := s.resource(t, "AWS::IAM::Role", "PaymentsUrlRole")
	rp := role["Properties"].(map[string]any)
	assert.NotContains(t, rp, "ManagedPolicyArns")
	assert.NotContains(t, rp, "Policies")

	want := map[string][]string{
		s.logicalID(t, "AWS::Logs::LogGroup", "PaymentsUrlLogs"): {"logs:CreateLogStream", "logs:PutLogEvents"},
		s.logicalID(t, "AWS::DynamoDB::Table", "Idempotency"):    {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
		s.logicalID(t, "AWS::DynamoDB::Table", "PaymentsTable"):  {"dynamodb:PutItem"},
	}
	got := map[string][]string{}
	policies := 0
	for policyID, policy := range s.resources("AWS::IAM::Policy") {
		pp := policy["Properties"].(map[string]any)
		if !slices.ContainsFunc(pp["Roles"].([]any), func(r any) bool { return assert.ObjectsAreEqual(ref(roleID), r) }) {
			continue
		}
		policies++
		stmts := statements(pp["PolicyDocument"])
		assert.Len(t, stmts, len(want), "%s: one statement per resource", policyID)
		for _, st := range stmts {
			require.Equal(t, "Allow", st["Effect"], policyID)
			require.NotContains(t, st, "Condition", policyID)
			res := asList(st["Resource"])
			require.Len(t, res, 1, "%s: one resource per statement", policyID)
			target, ok := res[0].(map[string]any)["Fn::GetAtt"].([]any)
			require.True(t, ok, "%s: resource %v is not a resource of this stack", policyID, res[0])
			require.Equal(t, "Arn", target[1])
			for _, a := range asList(st["Action"]) {
				got[target[0].(string)] = append(got[target[0].(string)], a.(string))
			}
		}
	}
	assert.Equal(t, 1, policies, "one policy on the role")
	for id := range got {
		slices.Sort(got[id])
	}
	assert.Equal(t, want, got)
}

// TestFunctionAssetsMatchMakefile: every function the stack deploys is one
// `make build` builds, under the same folder name, and the other way round.
func TestFunctionAssetsMatchMakefile(t *testing.T) {
	raw, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	joined := strings.ReplaceAll(string(raw), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^FUNCTIONS\s*:=\s*(.*)$`).FindStringSubmatch(joined)
	require.NotNil(t, m, "Makefile: FUNCTIONS := NAME:PACKAGE ...")
	var names []string
	for _, pair := range strings.Fields(m[1]) {
		name, pkg, ok := strings.Cut(pair, ":")
		require.True(t, ok, "FUNCTIONS entry %q is not NAME:PACKAGE", pair)
		assert.True(t, strings.HasPrefix(pkg, "./functions/"), pkg)
		names = append(names, name)
	}
	assert.ElementsMatch(t, functionAssets, names)
	assert.Contains(t, m[1], paymentsURLAsset+":./functions/payments/cmd/url")
}
