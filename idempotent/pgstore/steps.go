package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// AppendStep implements storage.StepStore with one UPDATE (appendStepSQL)
// that appends step to the record's step_names and step_data, on condition
// that the record is INPROGRESS, carries lease and, with the step, is no
// larger than Options.MaxItemBytes (measured by PostgreSQL on the stored
// row, in the same statement). A step that cannot fit in any record is
// refused before any call. A refusal is reported as storage.ErrTooLarge
// when the record is the caller's and in progress but would be too large,
// and as storage.ErrLeaseLost otherwise (gone, another lease, or no longer
// in progress).
func (s *Store) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	op := fmt.Sprintf("append step %q", step.Name)
	if err := checkText("step name", step.Name); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	stepSize := int64(len(step.Name) + len(step.Data))
	// The smallest record with the step: its id, lease and the step.
	if least := int64(len(id)+len(lease)+fixedBytes) + stepSize; least > int64(s.opts.MaxItemBytes) {
		return fmt.Errorf("pgstore: %s: %w: the record would be more than %d bytes (limit %d)", op, storage.ErrTooLarge, least, s.opts.MaxItemBytes)
	}
	var (
		done   bool
		status *string
		ourRow *bool
		size   *int64
	)
	data := step.Data
	if data == nil {
		data = []byte{} // a step's result is never NULL in the array
	}
	err := s.db.QueryRow(ctx, s.sql.appendStep, s.opts.QueryExecMode, id, lease, step.Name, data, stepSize, int64(s.opts.MaxItemBytes)).
		Scan(&done, &status, &ourRow, &size)
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: %s: %w", op, err)
	case done:
		return nil
	case status != nil && *status == string(storage.StatusInProgress) && ourRow != nil && *ourRow && size != nil &&
		*size+stepSize > int64(s.opts.MaxItemBytes):
		return fmt.Errorf("pgstore: %s: %w: the record would be %d bytes (limit %d)", op, storage.ErrTooLarge, *size+stepSize, s.opts.MaxItemBytes)
	case status != nil && *status == string(storage.StatusInProgress) && ourRow != nil && *ourRow:
		// The snapshot shows the caller's record, in progress and with
		// room: it changed under the statement (another claim took it).
		return fmt.Errorf("pgstore: %s: %w (the record changed under the write)", op, storage.ErrLeaseLost)
	}
	return fenced(op, status, ourRow)
}

// Suspend implements storage.StepStore with one UPDATE (suspendSQL) that
// sets the lease end to leaseEnd (millisecond precision) and the suspended
// flag of the INPROGRESS record id, on condition that it carries lease,
// keeping its steps and expiry. A record already gone is not an error; the
// caller's completed record is kept (storage.ErrAlreadyCompleted), as
// Release decides it.
func (s *Store) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	var (
		done   bool
		status *string
		ourRow *bool
	)
	if err := s.db.QueryRow(ctx, s.sql.suspend, s.opts.QueryExecMode, id, lease, millis(leaseEnd)).Scan(&done, &status, &ourRow); err != nil {
		return fmt.Errorf("pgstore: suspend: %w", err)
	}
	if done || status == nil {
		return nil
	}
	return s.notGivenBack(ctx, "suspend", id, lease, status, ourRow)
}
