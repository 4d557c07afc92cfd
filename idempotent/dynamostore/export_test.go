package dynamostore

import "github.com/idemkit/idemkit/idempotent/storage"

// NumberSize exposes the size of an integer by ItemSize's rule.
var NumberSize = intSize

// CompletedSize exposes the item size estimate of a completion.
func CompletedSize(s *Store, rec storage.Record) int { return s.completedSize(&rec) }
