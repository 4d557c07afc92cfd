package sampleevents_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	awsevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// TestRoundTrip decodes every file strictly into its aws-lambda-go type and
// checks that encoding it again keeps every field and value of the file, so
// no sample carries data the real type would drop.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range names(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := samples.Read(name)
			require.NoError(t, err)

			var typed any
			switch {
			case strings.HasPrefix(name, "payments-"):
				ev, err := samples.HTTP(name)
				require.NoError(t, err)
				typed = &ev
			case strings.HasPrefix(name, "orders-"):
				ev, err := samples.SQS(name)
				require.NoError(t, err)
				typed = &ev
			case strings.HasPrefix(name, "kinesis-"):
				ev, err := samples.Kinesis(name)
				require.NoError(t, err)
				typed = &ev
			case strings.HasPrefix(name, "ddbstreams-"):
				ev, err := samples.DynamoDB(name)
				require.NoError(t, err)
				typed = &ev
			case strings.HasPrefix(name, "kafka-"):
				ev, err := samples.Kafka(name)
				require.NoError(t, err)
				typed = &ev
			case strings.HasPrefix(name, "rabbitmq"):
				ev, err := samples.RabbitMQ(name)
				require.NoError(t, err)
				typed = &ev
			case strings.HasPrefix(name, "activemq"):
				ev, err := samples.ActiveMQ(name)
				require.NoError(t, err)
				typed = &ev
			default:
				t.Fatalf("%s: no known event type (name it payments-*, orders-*, kinesis-*, ddbstreams-*, kafka-*, rabbitmq* or activemq*)", name)
			}

			again, err := json.Marshal(typed)
			require.NoError(t, err)
			var orig, got any
			require.NoError(t, json.Unmarshal(raw, &orig))
			require.NoError(t, json.Unmarshal(again, &got))
			assertSubset(t, "$", orig, got)

			second := reflect.New(reflect.TypeOf(typed).Elem()).Interface()
			require.NoError(t, samples.DecodeStrict(again, second))
			assert.Equal(t, typed, second, "decode, encode, decode is stable")
		})
	}
}

// names returns the sample files, at least one.
func names(t *testing.T) []string {
	t.Helper()
	names, err := samples.Names()
	require.NoError(t, err)
	require.NotEmpty(t, names)
	return names
}

// TestNames: the files are those of the events/ folder at the module's
// root, and every constant names one of them.
func TestNames(t *testing.T) {
	t.Parallel()
	dir, err := samples.Dir()
	require.NoError(t, err)
	want, err := filepath.Abs(filepath.Join("..", "..", "events"))
	require.NoError(t, err)
	assert.Equal(t, want, dir)
	got := names(t)
	onDisk, err := filepath.Glob(filepath.Join(want, "*.json"))
	require.NoError(t, err)
	assert.Len(t, got, len(onDisk))
	for _, name := range []string{samples.PaymentNew, samples.PaymentReplay, samples.PaymentDifferentBody,
		samples.PaymentMissingKey, samples.PaymentInvalidAmountZero, samples.PaymentInvalidAmountString,
		samples.PaymentInvalidAmountFraction, samples.PaymentMalformedJSON, samples.PaymentSecondCaller,
		samples.OrdersBatch, samples.OrdersRedelivery} {
		assert.Contains(t, got, name)
	}
}

// assertSubset checks that every member of want is in got with the same value.
func assertSubset(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !assert.Truef(t, ok, "%s: want an object, got %T", path, got) {
			return
		}
		for k, v := range w {
			gv, ok := g[k]
			if assert.Truef(t, ok, "%s.%s is lost in the round trip", path, k) {
				assertSubset(t, path+"."+k, v, gv)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !assert.Truef(t, ok, "%s: want an array, got %T", path, got) || !assert.Lenf(t, g, len(w), "%s", path) {
			return
		}
		for i := range w {
			assertSubset(t, path+"["+strconv.Itoa(i)+"]", w[i], g[i])
		}
	default:
		assert.Equalf(t, want, got, "%s", path)
	}
}

// TestRealistic checks the facts a real event would have right: header
// names in lower case (HTTP APIs lower-case them), a content-length that
// matches the body, the route, SQS MD5s of the bodies, and the sources and
// grouping of stream and Kafka records.
func TestRealistic(t *testing.T) {
	t.Parallel()
	for _, name := range names(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			switch {
			case strings.HasPrefix(name, "kinesis-"):
				ev, err := samples.Kinesis(name)
				require.NoError(t, err)
				require.NotEmpty(t, ev.Records)
				for _, r := range ev.Records {
					assert.Equal(t, "aws:kinesis", r.EventSource)
					assert.NotEmpty(t, r.Kinesis.SequenceNumber)
				}
				return
			case strings.HasPrefix(name, "ddbstreams-"):
				ev, err := samples.DynamoDB(name)
				require.NoError(t, err)
				require.NotEmpty(t, ev.Records)
				for i, r := range ev.Records {
					assert.Equal(t, "aws:dynamodb", r.EventSource)
					if i > 0 {
						assert.Less(t, ev.Records[i-1].Change.SequenceNumber, r.Change.SequenceNumber, "one shard, in order")
					}
					for k, v := range r.Change.Keys {
						if r.Change.NewImage != nil {
							assert.Equal(t, v, r.Change.NewImage[k], "the key %s is in the new image", k)
						}
					}
				}
				return
			case strings.HasPrefix(name, "kafka-"):
				ev, err := samples.Kafka(name)
				require.NoError(t, err)
				require.NotEmpty(t, ev.Records)
				assert.Equal(t, "aws:kafka", ev.EventSource)
				for tp, recs := range ev.Records {
					for _, r := range recs {
						assert.Equal(t, tp, r.Topic+"-"+strconv.FormatInt(r.Partition, 10), "records grouped by topic-partition")
					}
				}
				return
			case strings.HasPrefix(name, "rabbitmq"):
				ev, err := samples.RabbitMQ(name)
				require.NoError(t, err)
				require.NotEmpty(t, ev.MessagesByQueue)
				assert.Equal(t, "aws:rmq", ev.EventSource)
				for q, msgs := range ev.MessagesByQueue {
					assert.Contains(t, q, "::", "queues are keyed queue::vhost")
					for _, m := range msgs {
						data, err := base64.StdEncoding.DecodeString(m.Data)
						require.NoError(t, err)
						assert.Equal(t, uint64(len(data)), m.BasicProperties.BodySize)
						require.NotNil(t, m.BasicProperties.MessageID)
					}
				}
				return
			case strings.HasPrefix(name, "activemq"):
				ev, err := samples.ActiveMQ(name)
				require.NoError(t, err)
				require.NotEmpty(t, ev.Messages)
				assert.Equal(t, "aws:mq", ev.EventSource)
				for _, m := range ev.Messages {
					assert.True(t, strings.HasPrefix(m.MessageID, "ID:"), "JMS message IDs start with ID:")
					assert.NotEmpty(t, m.Destination.PhysicalName)
					assert.LessOrEqual(t, m.BrokerInTime, m.BrokerOutTime)
				}
				return
			case strings.HasPrefix(name, "orders-"):
				ev, err := samples.SQS(name)
				require.NoError(t, err)
				require.NotEmpty(t, ev.Records)
				for _, m := range ev.Records {
					sum := md5.Sum([]byte(m.Body))
					assert.Equal(t, hex.EncodeToString(sum[:]), m.Md5OfBody, "md5OfBody of %s", m.MessageId)
					assert.Equal(t, "aws:sqs", m.EventSource)
					assert.NotEmpty(t, m.Attributes["ApproximateReceiveCount"])
				}
				return
			}
			ev, err := samples.HTTP(name)
			require.NoError(t, err)
			assert.Equal(t, "2.0", ev.Version)
			assert.Equal(t, "POST /payments", ev.RouteKey)
			assert.Equal(t, "POST", ev.RequestContext.HTTP.Method)
			assert.Equal(t, ev.RawPath, ev.RequestContext.HTTP.Path)
			for k := range ev.Headers {
				assert.Equal(t, strings.ToLower(k), k, "header names are lower case in payload 2.0")
			}
			assert.Equal(t, strconv.Itoa(len(ev.Body)), ev.Headers["content-length"])
			require.NotNil(t, ev.RequestContext.Authorizer)
			require.NotNil(t, ev.RequestContext.Authorizer.JWT)
			assert.NotEmpty(t, ev.RequestContext.Authorizer.JWT.Claims["sub"])
		})
	}
}

// TestREADME checks that README.md describes every file.
func TestREADME(t *testing.T) {
	t.Parallel()
	dir, err := samples.Dir()
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	for _, name := range names(t) {
		assert.Contains(t, string(readme), "`"+name+"`", "README.md lists %s", name)
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"known fields", `{"Records":[]}`, true},
		{"unknown field", `{"Records":[],"extra":1}`, false},
		{"trailing value", `{"Records":[]} {}`, false},
		{"trailing brace", `{"Records":[]}}`, false},
		{"trailing space", "{\"Records\":[]}\n ", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ev awsevents.SQSEvent
			err := samples.DecodeStrict([]byte(tt.in), &ev)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestReadMissing(t *testing.T) {
	t.Parallel()
	_, err := samples.Read("nope.json")
	assert.Error(t, err)
	_, err = samples.HTTP("nope.json")
	assert.Error(t, err)
	_, err = samples.Read("../go.mod")
	assert.Error(t, err, "only files of the events/ folder")
}
