// Package storage is the contract between idempotency's engine and the stores
// that persist its records: the [Store] interface, the [Record] it reads and
// writes, and the one liveness rule ([Record.Replaceable]) every store applies
// atomically. Handler authors never need it: they pass a store (dynamostore,
// redisstore or idempotent.NewMemoryStore) to a front door and match the errors
// of package idempotent. Store implementers use it together with
// package storetest, the conformance suite every Store must pass.
//
// The split follows database/sql and database/sql/driver: what callers use lives
// in idempotent, what a store must implement lives here.
package storage
