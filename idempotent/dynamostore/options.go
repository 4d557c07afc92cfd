package dynamostore

import (
	"os"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// Options configures a Store. New sets the defaults documented on each field
// and then applies its option functions, as the AWS SDK's constructors do.
// An attribute name left empty keeps its default.
type Options struct {
	// KeyAttr is the table's partition key attribute (type S). It holds the
	// record ID, or StaticPartitionKey when SortKeyAttr is set. Default "id".
	KeyAttr string

	// SortKeyAttr, when set, selects the composite key layout for a table
	// with a partition key KeyAttr and a sort key SortKeyAttr (both type S):
	// every item's partition key is StaticPartitionKey and its sort key is the
	// record ID. Default "" (a table with a partition key only).
	SortKeyAttr string

	// StaticPartitionKey is the partition key value of every item in the
	// composite key layout; ignored without SortKeyAttr. Default
	// "idempotency#" followed by AWS_LAMBDA_FUNCTION_NAME, or by "idemkit"
	// outside Lambda.
	StaticPartitionKey string

	// StatusAttr holds the record status, INPROGRESS or COMPLETED (S).
	// Default "status".
	StatusAttr string

	// ExpirationAttr holds when the record expires, in epoch seconds (N).
	// Enable the table's TTL on it. Default "expiration".
	ExpirationAttr string

	// InProgressExpirationAttr holds when an in-progress record's lease ends,
	// in epoch milliseconds (N); completed records do not have it. Default
	// "in_progress_expiration".
	InProgressExpirationAttr string

	// LeaseAttr holds the owner's lease token, which fences completion and
	// release (S). Default "lease".
	LeaseAttr string

	// ValidationAttr holds the payload fingerprint (S), when there is one.
	// Default "validation".
	ValidationAttr string

	// DataAttr holds the stored response (B). Default "data".
	DataAttr string

	// VersionAttr holds the record format version (N). Default "version".
	VersionAttr string

	// StepsAttr holds the steps an in-progress record's owners finished, in
	// order: a list (L) of maps {name: S, data: B} (data absent when a step's
	// result is empty). A claim that resumes the record writes it back as it
	// was (see Store.Claim), and completion removes it. Default "steps".
	StepsAttr string

	// SuspendedAttr marks an in-progress record whose owner gave it up
	// after its work failed (Store.Suspend), keeping its steps for the next
	// claim of the same payload: a BOOL, true when present. Suspend sets it;
	// a claim and Complete remove it, so it is absent from every other
	// record. A claim that replaces a suspended record reports a resume
	// (storage.ClaimResult.Resumed), not a takeover. Records written before
	// this attribute existed lack it and read as not suspended, which they
	// are not known to be: no format version change is needed. Default
	// "suspended".
	SuspendedAttr string

	// TraceAttr holds the trace context of the call that completed the
	// record (S; storage.Record.Trace), when that call was traced: a replay
	// links to it. Records of untraced calls, and those written before
	// this attribute existed, lack it, which is no format change. Default
	// "trace".
	TraceAttr string

	// MaxItemBytes is the largest item Complete writes, measured with
	// DynamoDB's item size rules (attribute names plus values); a larger one
	// yields an error wrapping storage.ErrTooLarge without a call to
	// DynamoDB. Zero or less means storage.DefaultMaxItemBytes. A larger value only
	// moves the refusal to DynamoDB, whose ValidationException for an
	// oversized item is reported as storage.ErrTooLarge as well.
	//
	// AppendStep refuses, before any call, a step that would not fit in an
	// item of MaxItemBytes holding nothing but the step and the record's
	// fixed attributes. The steps already stored are not known without a
	// read, so the whole item is bounded by DynamoDB's own limit (400 KB,
	// the default of MaxItemBytes), which refuses a step that would push it
	// past without writing anything; a MaxItemBytes below 400 KB thus bounds
	// each step, not their sum.
	MaxItemBytes int

	// ScanPageSize is the number of items each request of Scan reads (the
	// request's Limit); zero or less leaves it to DynamoDB (pages of up to
	// 1 MB).
	ScanPageSize int32

	// ClaimManyConcurrency is the number of claims Store.ClaimMany has in
	// flight at most (DynamoDB has no conditional batch write, so each
	// record is one conditional PutItem); zero or less means
	// DefaultClaimManyConcurrency. Each call in flight holds one HTTP
	// connection, and the SDK's default transport keeps 10 idle per host
	// between calls (MaxIdleConnsPerHost): with a higher bound, give the
	// client a transport that keeps as many, or each batch opens the
	// others anew.
	ClaimManyConcurrency int
}

// DefaultClaimManyConcurrency is the default Options.ClaimManyConcurrency:
// 100 records are claimed in 4 waves of one round trip. (Measured in
// BENCHMARKS.md §12: 32 at a time is as fast as 100 at a time over DynamoDB
// Local, whose own throughput bounds a batch there, and opens a third of the
// connections.)
const DefaultClaimManyConcurrency = 32

// defaultOptions returns the options New starts from.
func defaultOptions() Options {
	return Options{
		KeyAttr:                  "id",
		StaticPartitionKey:       defaultStaticPartitionKey(),
		StatusAttr:               "status",
		ExpirationAttr:           "expiration",
		InProgressExpirationAttr: "in_progress_expiration",
		LeaseAttr:                "lease",
		ValidationAttr:           "validation",
		DataAttr:                 "data",
		VersionAttr:              "version",
		StepsAttr:                "steps",
		SuspendedAttr:            "suspended",
		TraceAttr:                "trace",
		MaxItemBytes:             storage.DefaultMaxItemBytes,
		ClaimManyConcurrency:     DefaultClaimManyConcurrency,
	}
}

func defaultStaticPartitionKey() string {
	name := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	if name == "" {
		name = "idemkit"
	}
	return "idempotency#" + name
}

// normalize puts back the defaults of fields an option function cleared.
func (o *Options) normalize() {
	d := defaultOptions()
	for _, f := range []struct {
		v   *string
		def string
	}{
		{&o.KeyAttr, d.KeyAttr},
		{&o.StaticPartitionKey, d.StaticPartitionKey},
		{&o.StatusAttr, d.StatusAttr},
		{&o.ExpirationAttr, d.ExpirationAttr},
		{&o.InProgressExpirationAttr, d.InProgressExpirationAttr},
		{&o.LeaseAttr, d.LeaseAttr},
		{&o.ValidationAttr, d.ValidationAttr},
		{&o.DataAttr, d.DataAttr},
		{&o.VersionAttr, d.VersionAttr},
		{&o.StepsAttr, d.StepsAttr},
		{&o.SuspendedAttr, d.SuspendedAttr},
		{&o.TraceAttr, d.TraceAttr},
	} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	if o.MaxItemBytes <= 0 {
		o.MaxItemBytes = storage.DefaultMaxItemBytes
	}
	if o.ClaimManyConcurrency <= 0 {
		o.ClaimManyConcurrency = DefaultClaimManyConcurrency
	}
}

// attrNames lists the attribute names in use, for the duplicate check.
func (o *Options) attrNames() []string {
	names := []string{o.KeyAttr, o.StatusAttr, o.ExpirationAttr, o.InProgressExpirationAttr,
		o.LeaseAttr, o.ValidationAttr, o.DataAttr, o.VersionAttr, o.StepsAttr, o.SuspendedAttr, o.TraceAttr}
	if o.SortKeyAttr != "" {
		names = append(names, o.SortKeyAttr)
	}
	return names
}
