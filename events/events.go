package events

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	awsevents "github.com/aws/aws-lambda-go/events"
)

// The sample events, by file name. The idempotency keys, JWT subjects,
// order IDs and SKUs they share are what make them a story; README.md says
// what each one should produce.
const (
	// PaymentNew: POST /payments with a fresh Idempotency-Key, by caller Alice.
	PaymentNew = "payments-new.json"
	// PaymentReplay: the same key and body again (a client retry: new request id).
	PaymentReplay = "payments-replay.json"
	// PaymentDifferentBody: the same key with another amount.
	PaymentDifferentBody = "payments-different-body.json"
	// PaymentMissingKey: no Idempotency-Key header.
	PaymentMissingKey = "payments-missing-key.json"
	// PaymentInvalidAmountZero: amount 0, with its own key.
	PaymentInvalidAmountZero = "payments-invalid-amount-zero.json"
	// PaymentInvalidAmountString: amount "12" (a string), with its own key.
	PaymentInvalidAmountString = "payments-invalid-amount-string.json"
	// PaymentInvalidAmountFraction: amount 12.5, with its own key.
	PaymentInvalidAmountFraction = "payments-invalid-amount-fraction.json"
	// PaymentMalformedJSON: a truncated JSON body, with its own key.
	PaymentMalformedJSON = "payments-malformed-json.json"
	// PaymentSecondCaller: caller Bob (another JWT subject) sends Alice's key and body.
	PaymentSecondCaller = "payments-second-caller.json"

	// OrdersBatch: an SQS batch with an in-batch duplicate order (same
	// orderId, another messageId), a poison message (truncated JSON) and an
	// invalid order (quantity 0).
	OrdersBatch = "orders-batch.json"
	// OrdersRedelivery: the batch delivered again (ApproximateReceiveCount 2)
	// plus one new order.
	OrdersRedelivery = "orders-redelivery.json"

	// KinesisBatch: one shard of payment events with a producer retry and a
	// poison record.
	KinesisBatch = "kinesis-batch.json"
	// DDBStreamsPayments: the payments table's stream (NEW_AND_OLD_IMAGES):
	// three INSERTs and a MODIFY (a refund) of the first payment.
	DDBStreamsPayments = "ddbstreams-payments.json"
	// KafkaBatch: an MSK batch of two partitions of topic payments, with a
	// producer retry carrying the same idempotency-key header.
	KafkaBatch = "kafka-batch.json"
)

//go:embed *.json
var files embed.FS

// FS returns the sample event files.
func FS() fs.FS { return files }

// Names returns the names of all sample event files, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".") // an embedded directory always reads
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Read returns the bytes of a sample event file.
func Read(name string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return b, nil
}

// HTTP decodes a sample HTTP API request. It rejects fields the events type
// does not know, so a file with a misspelled field fails loudly.
func HTTP(name string) (awsevents.APIGatewayV2HTTPRequest, error) {
	var ev awsevents.APIGatewayV2HTTPRequest
	return ev, decode(name, &ev)
}

// SQS decodes a sample SQS event, rejecting unknown fields as HTTP does.
func SQS(name string) (awsevents.SQSEvent, error) {
	var ev awsevents.SQSEvent
	return ev, decode(name, &ev)
}

// Kinesis decodes a sample Kinesis event, rejecting unknown fields as HTTP does.
func Kinesis(name string) (awsevents.KinesisEvent, error) {
	var ev awsevents.KinesisEvent
	return ev, decode(name, &ev)
}

// DynamoDB decodes a sample DynamoDB Streams event, rejecting unknown fields
// as HTTP does.
func DynamoDB(name string) (awsevents.DynamoDBEvent, error) {
	var ev awsevents.DynamoDBEvent
	return ev, decode(name, &ev)
}

// Kafka decodes a sample Kafka (MSK or self-managed) event, rejecting
// unknown fields as HTTP does.
func Kafka(name string) (awsevents.KafkaEvent, error) {
	var ev awsevents.KafkaEvent
	return ev, decode(name, &ev)
}

func decode(name string, v any) error {
	b, err := Read(name)
	if err != nil {
		return err
	}
	if err := DecodeStrict(b, v); err != nil {
		return fmt.Errorf("events: %s: %w", name, err)
	}
	return nil
}

// DecodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
