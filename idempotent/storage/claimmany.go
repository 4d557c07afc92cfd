package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ClaimManyStore is a Store that claims many records in one call, in fewer
// round trips than one Claim each: an optional capability, discovered with a
// type assertion as StepStore is. A batch's claim wave uses it; with a store
// that is not one, the caller runs concurrent single Claims instead, which
// decide exactly the same. dynamostore, redisstore, pgstore and
// idempotent.NewMemoryStore implement it (docs/stores.md says how, in how
// many round trips).
type ClaimManyStore interface {
	Store

	// ClaimMany claims each of recs at now exactly as Claim would claim it
	// alone, each in its own atomic operation: every rule of Claim holds
	// for every record (a live record refuses it and is returned, the
	// caller's own lease counts as claimed, a lapsed lease is taken over,
	// a resumable takeover keeps the steps of a StepStore, an expired
	// record is replaced), and the records' fields are checked as Claim
	// checks them. Nothing is atomic across records: the claims may land in
	// any order, and other callers may see some before others.
	//
	// outcomes[i] is recs[i]'s, and len(outcomes) == len(recs) when err is
	// nil. A failure of one record's claim is that record's
	// ClaimOutcome.Err, the error Claim would have returned (a stored
	// record that cannot be decoded: one wrapping ErrCorruptRecord; the
	// record's own request failed); the other records are decided as if it
	// were not there.
	//
	// err is non-nil only when the call decided nothing: recs holds two
	// records of one ID (an error wrapping ErrDuplicateID, before anything
	// is written), ctx ended before the call, or the one request that
	// carried every record failed. The records' claims are then unknown,
	// as after a Claim that returned an error: count each as failed with
	// err. No records is no call, and no error.
	ClaimMany(ctx context.Context, recs []Record, now time.Time) (outcomes []ClaimOutcome, err error)
}

// ClaimOutcome is one record's answer to ClaimManyStore.ClaimMany: Result
// and Err are what Claim of that record alone would have returned.
type ClaimOutcome struct {
	// Result is the claim's result, as Claim's; zero when Err is set.
	Result ClaimResult
	// Err is the error of this record's claim alone, or nil.
	Err error
}

// ErrDuplicateID: a ClaimMany call carries two records of one ID, whose
// claims would decide on each other within one call. Nothing was written. A
// programmer error: claim each ID once per call and let its duplicates share
// the first one's outcome (the engine does).
var ErrDuplicateID = errors.New("idempotent: two records of one id in one call")

// DistinctIDs returns an error wrapping ErrDuplicateID, naming the id, when
// recs holds two records of one ID: the check every ClaimMany makes before
// it writes anything.
func DistinctIDs(recs []Record) error {
	seen := make(map[string]struct{}, len(recs))
	for i := range recs {
		if _, dup := seen[recs[i].ID]; dup {
			return fmt.Errorf("%w: %s", ErrDuplicateID, recs[i].ID)
		}
		seen[recs[i].ID] = struct{}{}
	}
	return nil
}
