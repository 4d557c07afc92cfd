package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

var _ storage.ClaimManyStore = (*Store)(nil)

// ClaimMany implements storage.ClaimManyStore with one statement for every
// record (claimManySQL): any number of records costs one round trip, new
// keys and refused claims alike (the refusing records come back in the
// same answer). Each record is decided by Claim's rules in the same atomic
// operation as its write. Calls over the same keys never deadlock: they
// lock the keys' rows in one order.
//
// A record whose ID PostgreSQL's text cannot hold fails alone, with
// ErrInvalidText, before any call. A record whose key another transaction
// inserted after the statement began (a race of two first claims) is
// decided by one more statement, of such records only: the one round trip
// more a Claim pays in the same race (claimAttempts bounds them). The
// first statement's error is the call's; a later one's, the error of each
// record it carried.
func (s *Store) ClaimMany(ctx context.Context, recs []storage.Record, now time.Time) ([]storage.ClaimOutcome, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: claim many: %w", err)
	}
	if err := storage.DistinctIDs(recs); err != nil {
		return nil, fmt.Errorf("pgstore: claim many: %w", err)
	}
	out := make([]storage.ClaimOutcome, len(recs))
	pending := make([]int, 0, len(recs)) // the indexes of recs still to decide
	for i := range recs {
		if err := checkText("record id", recs[i].ID); err != nil {
			out[i].Err = fmt.Errorf("pgstore: claim: %w", err)
			continue
		}
		pending = append(pending, i)
	}
	for statements := 1; len(pending) > 0; statements++ {
		again, err := s.claimMany(ctx, recs, pending, now, out)
		if err != nil && statements == 1 {
			return nil, fmt.Errorf("pgstore: claim many: %w", err)
		}
		if err != nil { // the first statement decided the others
			for _, i := range pending {
				out[i].Err = fmt.Errorf("pgstore: claim: %w", err)
			}
			break
		}
		if len(again) > 0 && statements == claimAttempts {
			for _, i := range again {
				out[i].Err = unreadRefusal(recs[i].ID)
			}
			break
		}
		pending = again
	}
	return out, nil
}

// claimMany runs claimManySQL for recs[i] of each i in pending, and sets
// out[i] for each it decides; again lists those to claim again.
func (s *Store) claimMany(ctx context.Context, recs []storage.Record, pending []int, now time.Time, out []storage.ClaimOutcome) (again []int, err error) {
	n := len(pending)
	var (
		ids, statuses, leases, fingerprints = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		expires                             = make([]time.Time, n)
		leaseEnds                           = make([]*time.Time, n)
		data                                = make([][]byte, n)
		versions                            = make([]int32, n)
	)
	for j, i := range pending {
		r := &recs[i]
		ids[j], statuses[j], leases[j], fingerprints[j] = r.ID, string(r.Status), r.Lease, r.Fingerprint
		expires[j], leaseEnds[j], data[j], versions[j] = seconds(r.ExpiresAt), millis(r.LeaseExpiresAt), nullBytes(r.Data), int32(r.Version)
	}
	rows, err := s.db.Query(ctx, s.sql.claimMany, s.opts.QueryExecMode,
		ids, statuses, expires, leaseEnds, leases, fingerprints, data, versions,
		time.Unix(now.Unix(), 0), time.UnixMilli(now.UnixMilli()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	decided := make([]bool, n)
	type answer struct {
		j int
		a claimAnswer
	}
	answers := make([]answer, 0, n)
	for rows.Next() {
		var (
			num int64
			a   = claimAnswer{old: new(row)}
		)
		if err := rows.Scan(append([]any{&num, &a.claimed, &a.keptNames, &a.keptData, &a.updated, &a.found}, a.old.dest()...)...); err != nil {
			return nil, err
		}
		j := int(num) - 1
		if j < 0 || j >= n || decided[j] {
			return nil, fmt.Errorf("the statement answered for record %d of %d", num, n)
		}
		decided[j] = true
		answers = append(answers, answer{j, a})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(answers) != n {
		return nil, fmt.Errorf("the statement answered for %d records of %d", len(answers), n)
	}
	for _, an := range answers {
		i := pending[an.j]
		res, done, err := decideClaim(&recs[i], now, an.a)
		if !done {
			again = append(again, i)
			continue
		}
		out[i] = storage.ClaimOutcome{Result: res, Err: err}
	}
	return again, nil
}
