package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// TxWrites is how the suite writes through a store's transactions (the
// store's own kind of write: a DynamoDB TransactWriteItem, a statement in a
// PostgreSQL transaction). RunTx takes one.
type TxWrites interface {
	// Add adds to tx a write named name; with fail, one whose condition
	// fails, so that the commit aborts. It returns an error only when it
	// cannot add the write: a failing write that shows its failure at once
	// (a PostgreSQL statement) returns nil too, and Commit must then report
	// storage.ErrTxAborted. Names are unique within a run of the suite.
	Add(ctx context.Context, tx storage.Tx, name string, fail bool) error
	// Committed reports whether the write named name committed.
	Committed(ctx context.Context, name string) (bool, error)
}

// RunTx checks the transactions of store with writes of its own, made
// through w: the writes commit with the completion or not at all (a lost
// lease, a failing write, a rollback commit none of them), and a commit
// without a record commits them alone. Run holds the cases of the record
// alone. Like Run, RunTx makes each case a subtest of a *testing.T.
func RunTx(t testing.TB, store storage.TxStore, w TxWrites) {
	t.Helper()
	if w == nil {
		t.Fatal("storetest: RunTx: nil TxWrites")
	}
	run(t, store, txWriteCases(), w)
}

func (c *checker) begin(id, lease string) storage.Tx {
	c.Helper()
	tx, err := c.txs.BeginTx(c.ctx(), id, lease)
	if err != nil {
		c.fatalf("BeginTx(%q): %v", id, err)
	}
	return tx
}

func (c *checker) mustCommit(tx storage.Tx, rec storage.Record) {
	c.Helper()
	if err := tx.Commit(c.ctx(), rec); err != nil {
		c.fatalf("Commit(%q): %v", rec.ID, err)
	}
}

func (c *checker) mustRollback(tx storage.Tx) {
	c.Helper()
	if err := tx.Rollback(c.ctx()); err != nil {
		c.errorf("Rollback: %v", err)
	}
}

// add adds the write name (failing with fail) through RunTx's TxWrites.
func (c *checker) add(tx storage.Tx, name string, fail bool) {
	c.Helper()
	if err := c.writes.Add(c.ctx(), tx, name, fail); err != nil {
		c.fatalf("TxWrites.Add(%s, fail=%v): %v", name, fail, err)
	}
}

// wantWrites checks which of names committed.
func (c *checker) wantWrites(committed bool, what string, names ...string) {
	c.Helper()
	for _, n := range names {
		got, err := c.writes.Committed(c.ctx(), n)
		switch {
		case err != nil:
			c.fatalf("TxWrites.Committed(%s): %v", n, err)
		case got != committed:
			c.errorf("%s: write %s committed = %v, want %v", what, n, got, committed)
		}
	}
}

// writeNames returns n write names unique to this run.
func writeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "storetest-write-" + randomHex(12)
	}
	return names
}

// txCases are the transaction cases of the record alone, run by Run on a
// storage.TxStore.
func txCases() []testCase {
	return []testCase{
		{"TxCommitWithoutWritesCompletes", txStore, func(c *checker) {
			// Commit overwrites the record exactly as Complete does: it
			// drops the steps and the lease end.
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			if c.steps != nil {
				c.mustAppend(a, someSteps(1)[0])
			}
			done := completed(a, []byte(`p{"tx":true}`), c.now.Add(time.Hour))
			c.mustCommit(c.begin(a.ID, a.Lease), done)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Minute)), done)
		}},
		{"TxCommitWithoutData", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			done := completed(a, nil, c.now.Add(time.Hour))
			c.mustCommit(c.begin(a.ID, a.Lease), done)
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"TxCommitFencedByLease", txStore, func(c *checker) {
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			later := c.now.Add(time.Minute)
			b := rival(a, later.Add(time.Minute))
			c.mustClaim(b, later) // a's lease lapsed: b took the record over
			c.wantLeaseLost(tx.Commit(c.ctx(), completed(a, []byte("p-stale"), c.now.Add(time.Hour))), "Commit with a lost lease")
			c.mustRollback(tx)
			c.sameRecord(c.mustRefuse(rival(a, later.Add(time.Minute)), later), b)
		}},
		{"TxCommitMissingRecord", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.wantLeaseLost(c.begin(a.ID, a.Lease).Commit(c.ctx(), completed(a, []byte("p"), c.now.Add(time.Hour))), "Commit of a missing record")
		}},
		{"TxRollbackLeavesTheRecord", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			c.mustRollback(tx)
			c.mustRollback(tx) // safe twice
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			if c.steps != nil {
				if err := c.steps.Suspend(c.ctx(), a.ID, a.Lease, c.now); err != nil {
					c.fatalf("Suspend after Rollback: %v", err)
				}
			}
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release after Rollback: %v", err)
			}
		}},
		{"TxCommitRetried", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			done := completed(a, []byte("p-retried"), c.now.Add(time.Hour))
			c.mustCommit(tx, done)
			c.mustCommit(tx, done) // a retried commit succeeds again
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"TxCommitTooLargeWritesNothing", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			err := tx.Commit(c.ctx(), completed(a, bytes.Repeat([]byte{'x'}, 500<<10), c.now.Add(time.Hour)))
			if !errors.Is(err, storage.ErrTooLarge) {
				c.fatalf("Commit of a 500 KB record: %v, want one wrapping storage.ErrTooLarge", err)
			}
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			// Commit may be called again, with a smaller record.
			done := completed(a, []byte("n"), c.now.Add(time.Hour))
			c.mustCommit(tx, done)
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"TxWithoutRecordCommitsNothingElse", txStore, func(c *checker) {
			tx := c.begin("", "")
			c.mustCommit(tx, storage.Record{})
			c.mustRollback(c.begin("", ""))
		}},
	}
}

// txWriteCases are RunTx's cases.
func txWriteCases() []testCase {
	return []testCase{
		{"TxWritesCommitWithTheCompletion", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			names := writeNames(2)
			for _, n := range names {
				c.add(tx, n, false)
			}
			c.wantWrites(false, "before Commit", names...)
			done := completed(a, []byte("p-with-writes"), c.now.Add(time.Hour))
			c.mustCommit(tx, done)
			c.wantWrites(true, "after Commit", names...)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), done)
		}},
		{"TxLostLeaseCommitsNoWrites", txStore, func(c *checker) {
			a := c.inProgress(time.Second)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			names := writeNames(2)
			for _, n := range names {
				c.add(tx, n, false)
			}
			later := c.now.Add(time.Minute)
			b := rival(a, later.Add(time.Minute))
			c.mustClaim(b, later) // the lapsed owner's record is taken over
			c.wantLeaseLost(tx.Commit(c.ctx(), completed(a, []byte("p-stale"), c.now.Add(time.Hour))), "Commit with a lost lease")
			c.mustRollback(tx)
			c.wantWrites(false, "a commit that lost its lease", names...)
			c.sameRecord(c.mustRefuse(rival(a, later.Add(time.Minute)), later), b)
		}},
		{"TxFailingWriteAbortsEverything", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			names := writeNames(3)
			c.add(tx, names[0], false)
			c.add(tx, names[1], true)
			c.add(tx, names[2], false)
			err := tx.Commit(c.ctx(), completed(a, []byte("p-aborted"), c.now.Add(time.Hour)))
			switch {
			case !errors.Is(err, storage.ErrTxAborted):
				c.fatalf("Commit with a failing write: %v, want one wrapping storage.ErrTxAborted", err)
			case errors.Is(err, storage.ErrLeaseLost):
				c.errorf("Commit with a failing write: %v also wraps ErrLeaseLost", err)
			}
			c.mustRollback(tx)
			c.wantWrites(false, "an aborted commit", names...)
			// The record is still the owner's, in progress: the engine
			// releases it next.
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release after an aborted commit: %v", err)
			}
		}},
		{"TxRollbackCommitsNothing", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			names := writeNames(1)
			c.add(tx, names[0], false)
			c.mustRollback(tx)
			c.wantWrites(false, "after Rollback", names...)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
				c.fatalf("Release after Rollback: %v", err)
			}
		}},
		{"TxRetriedCommitKeepsTheWrites", txStore, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			names := writeNames(1)
			c.add(tx, names[0], false)
			done := completed(a, []byte("p-retried"), c.now.Add(time.Hour))
			c.mustCommit(tx, done)
			c.mustCommit(tx, done) // a retried commit succeeds again
			c.wantWrites(true, "after a retried Commit", names...)
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"TxTooLargeThenSmallerCommitsTheWrites", txStore, func(c *checker) {
			// The engine's path past the item limit: Commit refuses the
			// record with its response, writing nothing, and is called again
			// without it.
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			tx := c.begin(a.ID, a.Lease)
			names := writeNames(1)
			c.add(tx, names[0], false)
			err := tx.Commit(c.ctx(), completed(a, bytes.Repeat([]byte{'x'}, 500<<10), c.now.Add(time.Hour)))
			if !errors.Is(err, storage.ErrTooLarge) {
				c.fatalf("Commit of a 500 KB record: %v, want one wrapping storage.ErrTooLarge", err)
			}
			c.wantWrites(false, "a commit refused as too large", names...)
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			done := completed(a, []byte("n"), c.now.Add(time.Hour))
			c.mustCommit(tx, done)
			c.wantWrites(true, "the smaller commit", names...)
			c.sameRecord(c.mustRefuse(rival(a, c.now), c.now), done)
		}},
		{"TxWithoutRecordCommitsTheWritesAlone", txStore, func(c *checker) {
			tx := c.begin("", "")
			names := writeNames(2)
			for _, n := range names {
				c.add(tx, n, false)
			}
			c.wantWrites(false, "before Commit", names...)
			c.mustCommit(tx, storage.Record{})
			c.wantWrites(true, "a commit without a record", names...)
		}},
		{"TxWithoutRecordFailingWriteAborts", txStore, func(c *checker) {
			tx := c.begin("", "")
			names := writeNames(2)
			c.add(tx, names[0], false)
			c.add(tx, names[1], true)
			if err := tx.Commit(c.ctx(), storage.Record{}); !errors.Is(err, storage.ErrTxAborted) {
				c.fatalf("Commit without a record, with a failing write: %v, want one wrapping storage.ErrTxAborted", err)
			}
			c.mustRollback(tx)
			c.wantWrites(false, "an aborted commit without a record", names...)
		}},
	}
}
