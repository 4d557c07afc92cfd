// Package pgtrips counts the round trips a pgx pool makes to PostgreSQL, for
// the tests and the benchmarks that hold pgstore to its round-trip counts
// (idempotent/pgstore's tests, bench/ §11). It is not part of the library.
//
// pgx sends each statement's messages (Bind, Execute, Sync; Parse and
// Describe too when it prepares one) in one write to the connection and then
// reads the answer, so a write is a round trip: Count counts writes.
package pgtrips
