// Package batchtest holds what the tests of the batch sources share: the
// stores they run on (the memory store and DynamoDB Local), a clock they
// move, a store that loses the writes of a crashed invocation, and a
// handler that records its calls. It is imported by tests only.
package batchtest
