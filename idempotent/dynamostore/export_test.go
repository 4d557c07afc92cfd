package dynamostore

import "github.com/idemkit/idemkit/idempotent/storage"

// NumberSize exposes numberSize to the external tests.
var NumberSize = numberSize

// CompletedSize exposes the item size estimate of a completion.
func CompletedSize(s *Store, rec storage.Record) int { return s.completedSize(&rec) }
