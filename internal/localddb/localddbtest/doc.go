// Package localddbtest gives tests a DynamoDB Local client and tables that
// live as long as the test (see package localddb, which the demo uses; this
// package keeps package testing out of its binary).
package localddbtest
