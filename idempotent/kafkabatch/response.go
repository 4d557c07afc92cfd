package kafkabatch

// Response is the partial batch response of a Kafka event source mapping
// (Amazon MSK or self-managed Apache Kafka): for each topic-partition that
// must be read again, the offset to resume from. aws-lambda-go has no type
// for it; its JSON is the one documented at
// https://docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html
// (partial batch response, provisioned mode):
//
//	{"batchItemFailures": [{"itemIdentifier": {"partition": "payments-0", "offset": 16}}]}
//
// Lambda reads it only when the event source mapping enables
// ReportBatchItemFailures; an empty list means the whole batch succeeded.
type Response struct {
	// BatchItemFailures names, per topic-partition to read again, the
	// record to resume from; never nil, so it encodes as [].
	BatchItemFailures []BatchItemFailure `json:"batchItemFailures"`
}

// BatchItemFailure names one record Lambda must deliver again, with every
// later record of its topic-partition.
type BatchItemFailure struct {
	// ItemIdentifier is the record's place.
	ItemIdentifier ItemIdentifier `json:"itemIdentifier"`
}

// ItemIdentifier is a record's place: its topic-partition, as the key of the
// event's records map ("<topic>-<partition>"), and its offset.
type ItemIdentifier struct {
	// Partition is the key of the records map: "<topic>-<partition>".
	Partition string `json:"partition"`
	// Offset is the record's offset in its partition.
	Offset int64 `json:"offset"`
}
