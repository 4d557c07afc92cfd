package redisstore

import "github.com/idemkit/idemkit/idempotent/storage"

// DefaultKeyPrefix is the default Options.KeyPrefix.
const DefaultKeyPrefix = "idemkit:"

// Options configures a Store. New sets the defaults documented on each field
// and then applies its option functions, as the AWS SDK's constructors do.
type Options struct {
	// KeyPrefix is prepended to a record's ID to form its Redis key, so the
	// records can share a database with other data and are easy to find
	// (SCAN MATCH idemkit:*). Default DefaultKeyPrefix; an option function
	// may set "" for no prefix.
	KeyPrefix string

	// MaxItemBytes is the largest record Complete and AppendStep write,
	// counted as the length of the key plus the lengths of every field name
	// and value of the hash as it would be written (for AppendStep, the
	// stored hash with the step added); a larger one yields an error
	// wrapping storage.ErrTooLarge, and nothing is written. Zero or less
	// means storage.DefaultMaxItemBytes.
	MaxItemBytes int

	// ScanCount is the COUNT hint of each SCAN call of Scan; zero or less
	// means 100.
	ScanCount int64
}

// defaultOptions returns the options New starts from.
func defaultOptions() Options {
	return Options{
		KeyPrefix:    DefaultKeyPrefix,
		MaxItemBytes: storage.DefaultMaxItemBytes,
		ScanCount:    100,
	}
}

// normalize puts back the defaults of out-of-range values.
func (o *Options) normalize() {
	if o.MaxItemBytes <= 0 {
		o.MaxItemBytes = storage.DefaultMaxItemBytes
	}
	if o.ScanCount <= 0 {
		o.ScanCount = 100
	}
}
