package dynamostore

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// errStepsNotYet stands in until this store records steps.
var errStepsNotYet = errors.New("dynamostore: steps are not implemented yet")

// AppendStep implements storage.Store.
func (s *Store) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	return errStepsNotYet
}

// Suspend implements storage.Store.
func (s *Store) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	return errStepsNotYet
}
