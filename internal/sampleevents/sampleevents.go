package sampleevents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// The sample events, by file name. The idempotency keys, JWT subjects,
// order IDs and SKUs they share are what make them a story; events/README.md
// says what each one should produce.
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

	// RabbitMQBatch: an Amazon MQ for RabbitMQ batch of one queue, three
	// payments with producer-set message IDs.
	RabbitMQBatch = "rabbitmq.json"
	// ActiveMQBatch: an Amazon MQ for ActiveMQ batch of one queue, three
	// payments.
	ActiveMQBatch = "activemq.json"
)

// modulePath is the module whose checkout holds the events/ folder.
const modulePath = "github.com/idemkit/idemkit"

// Dir returns the events/ folder of the checkout.
var Dir = sync.OnceValues(findDir)

func findDir() (string, error) {
	// This file is internal/sampleevents/sampleevents.go of the checkout,
	// unless the binary was built with -trimpath.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..", "events")
		if _, err := os.Stat(filepath.Join(dir, PaymentNew)); err == nil {
			return filepath.Clean(dir), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("sampleevents: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isModuleRoot(d) {
			return filepath.Join(d, "events"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("sampleevents: no checkout of %s (its go.mod) in %s or above: run from inside the checkout", modulePath, wd)
		}
	}
}

// isModuleRoot reports whether dir holds the go.mod of modulePath.
func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, "module")), `"`) == modulePath
		}
	}
	return false
}

// Names returns the names of all sample event files, sorted.
func Names() ([]string, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("sampleevents: %w", err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	slices.Sort(names)
	return names, nil
}

// Read returns the bytes of a sample event file.
func Read(name string) ([]byte, error) {
	if name != filepath.Base(name) || filepath.Ext(name) != ".json" {
		return nil, fmt.Errorf("sampleevents: %q is not the name of a sample event file", name)
	}
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("sampleevents: %w", err)
	}
	return b, nil
}

// HTTP decodes a sample HTTP API request. It rejects fields the events type
// does not know, so a file with a misspelled field fails loudly.
func HTTP(name string) (events.APIGatewayV2HTTPRequest, error) {
	var ev events.APIGatewayV2HTTPRequest
	return ev, decode(name, &ev)
}

// SQS decodes a sample SQS event, rejecting unknown fields as HTTP does.
func SQS(name string) (events.SQSEvent, error) {
	var ev events.SQSEvent
	return ev, decode(name, &ev)
}

// Kinesis decodes a sample Kinesis event, rejecting unknown fields as HTTP does.
func Kinesis(name string) (events.KinesisEvent, error) {
	var ev events.KinesisEvent
	return ev, decode(name, &ev)
}

// DynamoDB decodes a sample DynamoDB Streams event, rejecting unknown fields
// as HTTP does.
func DynamoDB(name string) (events.DynamoDBEvent, error) {
	var ev events.DynamoDBEvent
	return ev, decode(name, &ev)
}

// Kafka decodes a sample Kafka (MSK or self-managed) event, rejecting
// unknown fields as HTTP does.
func Kafka(name string) (events.KafkaEvent, error) {
	var ev events.KafkaEvent
	return ev, decode(name, &ev)
}

// RabbitMQ decodes a sample Amazon MQ for RabbitMQ event, rejecting unknown
// fields as HTTP does.
func RabbitMQ(name string) (events.RabbitMQEvent, error) {
	var ev events.RabbitMQEvent
	return ev, decode(name, &ev)
}

// ActiveMQ decodes a sample Amazon MQ for ActiveMQ event, rejecting unknown
// fields as HTTP does.
func ActiveMQ(name string) (events.ActiveMQEvent, error) {
	var ev events.ActiveMQEvent
	return ev, decode(name, &ev)
}

func decode(name string, v any) error {
	b, err := Read(name)
	if err != nil {
		return err
	}
	if err := DecodeStrict(b, v); err != nil {
		return fmt.Errorf("sampleevents: %s: %w", name, err)
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
