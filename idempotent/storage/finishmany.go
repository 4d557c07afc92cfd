package storage

import "context"

// FinishManyStore is a Store that completes or releases many records in one
// call, in fewer round trips than one Complete or Release each: an optional
// capability, discovered with a type assertion as StepStore is. A batch's
// completions that queue up while one is in flight go out in one
// CompleteMany, and the claims a batch made but did not run are given back in
// one ReleaseMany; with a store that is not one, the caller makes concurrent
// single calls instead, which decide exactly the same. Implement it only
// where it saves round trips: redisstore, pgstore and
// idempotent.NewMemoryStore do; dynamostore does not, since DynamoDB has no
// conditional batch write (docs/stores.md says how, in how many round trips).
//
// Nothing is atomic across records: each record is decided by its own atomic
// operation, as by the single call, in any order. errs[i] is recs[i]'s error,
// the one the single call would have returned for it alone (nil on success),
// and len(errs) == len(recs) when err is nil. err is non-nil only when the
// call decided nothing: recs holds two records of one ID (an error wrapping
// ErrDuplicateID, before anything is written), ctx ended before the call, or
// the one request that carried every record failed; each record's outcome is
// then unknown, as after a single call that returned an error. No records is
// no call, and no error.
type FinishManyStore interface {
	Store

	// CompleteMany completes each of recs exactly as Complete(ctx, rec)
	// would alone: conditioned on the stored record's Lease, ErrLeaseLost
	// and ErrTooLarge (without writing that record) per record.
	CompleteMany(ctx context.Context, recs []Record) (errs []error, err error)

	// ReleaseMany releases each of recs, by its ID and Lease, exactly as
	// Release(ctx, rec.ID, rec.Lease) would alone: a record already gone is
	// no error, ErrLeaseLost and ErrAlreadyCompleted per record. Only ID
	// and Lease of each record are read.
	ReleaseMany(ctx context.Context, recs []Record) (errs []error, err error)
}
