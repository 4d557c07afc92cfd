package main

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/sampleevents"
)

// §12's events: batches in the shapes Lambda delivers, built from the first
// record of each sample event in events/ (internal/sampleevents), so every
// field a front door reads is there. Batch n's records carry keys no other
// batch of the run has: sequence numbers, event IDs, offsets and message IDs
// are functions of n and the record's place, so the default keys (the
// front doors' own, with default options) are new in each batch.

// streamPayment is the payment a stream record carries (kinesis-batch.json's
// data, kafka-batch.json's value, ddbstreams-payments.json's image).
type streamPayment struct {
	PaymentID  string `json:"paymentId" dynamodbav:"paymentId"`
	CustomerID string `json:"customerId" dynamodbav:"customerId"`
	Amount     int64  `json:"amount" dynamodbav:"amount"`
	Currency   string `json:"currency" dynamodbav:"currency"`
}

// batchOrder is an SQS message's body (orders-batch.json).
type batchOrder struct {
	OrderID  string `json:"orderId"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// batchTemplates are the sample records the batches are made of.
type batchTemplates struct {
	kinesis  events.KinesisEventRecord
	ddb      events.DynamoDBEventRecord
	kafkaEv  events.KafkaEvent // its fields but the records
	kafka    events.KafkaRecord
	sqs      events.SQSMessage
	rmqEv    events.RabbitMQEvent // its fields but the messages
	rmq      events.RabbitMQMessage
	rmqQueue string               // the queue ("name::vhost") of the template's messages
	amqEv    events.ActiveMQEvent // its fields but the messages
	amq      events.ActiveMQMessage
	payment  streamPayment
	order    batchOrder
	seqStart string // the leading digits of the Kinesis sequence numbers
}

func loadBatchTemplates() (batchTemplates, error) {
	var t batchTemplates
	kin, err := sampleevents.Kinesis(sampleevents.KinesisBatch)
	if err != nil {
		return t, err
	}
	ddb, err := sampleevents.DynamoDB(sampleevents.DDBStreamsPayments)
	if err != nil {
		return t, err
	}
	kafka, err := sampleevents.Kafka(sampleevents.KafkaBatch)
	if err != nil {
		return t, err
	}
	sqs, err := sampleevents.SQS(sampleevents.OrdersBatch)
	if err != nil {
		return t, err
	}
	rmq, err := sampleevents.RabbitMQ(sampleevents.RabbitMQBatch)
	if err != nil {
		return t, err
	}
	amq, err := sampleevents.ActiveMQ(sampleevents.ActiveMQBatch)
	if err != nil {
		return t, err
	}
	part := kafka.Records["payments-0"]
	if len(kin.Records) == 0 || len(ddb.Records) == 0 || len(part) == 0 || len(sqs.Records) == 0 ||
		len(rmq.MessagesByQueue) != 1 || len(amq.Messages) == 0 {
		return t, errors.New("batch events: a sample event has no records (or the RabbitMQ one not one queue)")
	}
	for q, msgs := range rmq.MessagesByQueue {
		if len(msgs) == 0 {
			return t, errors.New("batch events: the RabbitMQ sample's queue has no messages")
		}
		t.rmqQueue, t.rmq = q, msgs[0]
	}
	t.rmqEv, t.rmqEv.MessagesByQueue = rmq, nil
	t.amqEv, t.amq = amq, amq.Messages[0]
	t.amqEv.Messages = nil
	t.kinesis, t.ddb, t.kafka, t.sqs = kin.Records[0], ddb.Records[0], part[0], sqs.Records[0]
	t.kafkaEv = kafka
	t.kafkaEv.Records = nil
	if err := json.Unmarshal(t.kinesis.Kinesis.Data, &t.payment); err != nil {
		return t, fmt.Errorf("batch events: %s's first record: %w", sampleevents.KinesisBatch, err)
	}
	if err := json.Unmarshal([]byte(t.sqs.Body), &t.order); err != nil {
		return t, fmt.Errorf("batch events: %s's first message: %w", sampleevents.OrdersBatch, err)
	}
	if strings.HasSuffix(t.sqs.EventSourceARN, ".fifo") {
		return t, errors.New("batch events: the SQS sample is a FIFO queue's, want a standard queue's")
	}
	seq := t.kinesis.Kinesis.SequenceNumber
	if len(seq) < 40 {
		return t, fmt.Errorf("batch events: Kinesis sequence number %q is too short", seq)
	}
	t.seqStart = seq[:len(seq)-20]
	return t, nil
}

// batchPaymentID is the payment of batch n's record i.
func batchPaymentID(n, i int) string { return fmt.Sprintf("pay_b%d_%d", n, i) }

func (t batchTemplates) paymentJSON(n, i int) []byte {
	p := t.payment
	p.PaymentID = batchPaymentID(n, i)
	b, _ := json.Marshal(p) // a struct of strings and an int: cannot fail
	return b
}

// kinesisEvent is batch n: records records of the template's shard and
// partition key, in sequence-number order.
func (t batchTemplates) kinesisEvent(n, records int) events.KinesisEvent {
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, records)}
	shard, _, _ := strings.Cut(t.kinesis.EventID, ":")
	for i := range ev.Records {
		r := t.kinesis
		r.Kinesis.SequenceNumber = fmt.Sprintf("%s%010d%010d", t.seqStart, n, i)
		r.Kinesis.Data = t.paymentJSON(n, i)
		r.EventID = shard + ":" + r.Kinesis.SequenceNumber
		ev.Records[i] = r
	}
	return ev
}

// ddbStreamsEvent is batch n: records INSERTs of one table's stream (one
// shard), in sequence-number order, each of its own payment.
func (t batchTemplates) ddbStreamsEvent(n, records int) events.DynamoDBEvent {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, records)}
	for i := range ev.Records {
		r := t.ddb
		id := events.NewStringAttribute(batchPaymentID(n, i))
		r.EventID = fmt.Sprintf("%016x%016x", n, i)
		r.Change.SequenceNumber = fmt.Sprintf("%010d%010d", n, i)
		r.Change.Keys = maps.Clone(t.ddb.Change.Keys)
		r.Change.Keys["paymentId"] = id
		r.Change.NewImage = maps.Clone(t.ddb.Change.NewImage)
		r.Change.NewImage["paymentId"] = id
		ev.Records[i] = r
	}
	return ev
}

// kafkaPartition is the records map's key of the template's partition.
func (t batchTemplates) kafkaPartition() string {
	return fmt.Sprintf("%s-%d", t.kafka.Topic, t.kafka.Partition)
}

// kafkaEvent is batch n: records records of one topic-partition, in offset
// order.
func (t batchTemplates) kafkaEvent(n, records int) events.KafkaEvent {
	ev := t.kafkaEv
	recs := make([]events.KafkaRecord, records)
	for i := range recs {
		r := t.kafka
		r.Offset = int64(n)*1_000_000 + int64(i)
		r.Value = base64.StdEncoding.EncodeToString(t.paymentJSON(n, i))
		recs[i] = r
	}
	ev.Records = map[string][]events.KafkaRecord{t.kafkaPartition(): recs}
	return ev
}

// batchOrderID is the order of batch n's message i.
func batchOrderID(n, i int) string { return fmt.Sprintf("order-b%d-%d", n, i) }

// sqsEvent is batch n: messages messages of the template's standard queue.
func (t batchTemplates) sqsEvent(n, messages int) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, messages)}
	for i := range ev.Records {
		m := t.sqs
		o := t.order
		o.OrderID = batchOrderID(n, i)
		body, _ := json.Marshal(o) // strings and an int: cannot fail
		sum := md5.Sum(body)
		m.MessageId = fmt.Sprintf("%08x-0000-4000-8000-%012x", n, i)
		m.ReceiptHandle = "AQEB" + base64.StdEncoding.EncodeToString([]byte(m.MessageId))
		m.Body = string(body)
		m.Md5OfBody = hex.EncodeToString(sum[:])
		m.Attributes = maps.Clone(t.sqs.Attributes)
		ev.Records[i] = m
	}
	return ev
}

// rabbitMQEvent is batch n: messages messages of the template's queue, in
// delivery order, each with a message ID of its own.
func (t batchTemplates) rabbitMQEvent(n, messages int) events.RabbitMQEvent {
	ev := t.rmqEv
	msgs := make([]events.RabbitMQMessage, messages)
	for i := range msgs {
		m := t.rmq
		id := fmt.Sprintf("msg-b%d-%d", n, i)
		m.BasicProperties.MessageID = &id
		m.Data = base64.StdEncoding.EncodeToString(t.paymentJSON(n, i))
		msgs[i] = m
	}
	ev.MessagesByQueue = map[string][]events.RabbitMQMessage{t.rmqQueue: msgs}
	return ev
}

// activeMQEvent is batch n: messages messages of the template's
// destination, in delivery order, with the broker's message IDs.
func (t batchTemplates) activeMQEvent(n, messages int) events.ActiveMQEvent {
	ev := t.amqEv
	ev.Messages = make([]events.ActiveMQMessage, messages)
	for i := range ev.Messages {
		m := t.amq
		m.MessageID = fmt.Sprintf("ID:idembench-%d-1:1:1:1:%d", n, i+1)
		m.Data = base64.StdEncoding.EncodeToString(t.paymentJSON(n, i))
		m.Properties = maps.Clone(t.amq.Properties)
		ev.Messages[i] = m
	}
	return ev
}
