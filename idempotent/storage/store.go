package storage

import (
	"context"
	"time"
)

// Store persists idempotency records. Implementations must make each method a
// single atomic operation; the wrapper relies on the store, not on locks of its
// own, to serialize concurrent invocations. Stores are clock-free: the wrapper
// passes the current time in, so every store behaves identically and tests never
// sleep. The package storetest holds a conformance suite every Store must pass.
type Store interface {
	// Claim creates rec (status INPROGRESS) unless a stored record holds
	// rec.ID that rec may not replace by the rule of [Record.Replaceable]
	// (checked in the same atomic operation as the write). A stored record
	// carrying rec.Lease is the caller's own (a retried claim whose first
	// response was lost) and counts as claimed.
	//
	// The claimed record holds rec's fields (Suspended false) and no Steps,
	// except when the claim replaces a record that is [Record.Resumable] for
	// rec (a takeover for the same payload): a StepStore then keeps that
	// record's Steps, and returns them in ClaimResult.Steps, in the same
	// atomic operation.
	//
	// When the claim is refused, the result holds the stored record and err is nil.
	// A stored record that cannot be decoded yields an error wrapping
	// ErrCorruptRecord.
	Claim(ctx context.Context, rec Record, now time.Time) (ClaimResult, error)

	// Complete overwrites the record's Status, Data, ExpiresAt and Trace with rec's,
	// clears LeaseExpiresAt and Suspended and drops its Steps, on condition
	// that the stored record carries rec.Lease (status is not checked, so a
	// retried completion succeeds again).
	// It returns an error wrapping ErrLeaseLost if the record is gone or has
	// another lease, and one wrapping ErrTooLarge, without writing, if the store
	// cannot hold the record.
	Complete(ctx context.Context, rec Record) error

	// Release deletes the record id on condition that it carries lease and is
	// INPROGRESS: it gives back a claim whose work did not complete. A record
	// that is already gone is not an error; one with another lease yields an
	// error wrapping ErrLeaseLost; one COMPLETED under lease is kept and
	// yields an error wrapping ErrAlreadyCompleted (the caller's completion
	// landed). A write still in flight that is fenced on the record
	// (Complete's, or a Tx's Commit) then finds no record and fails, so after
	// a successful Release nothing of the caller's run can complete.
	Release(ctx context.Context, id, lease string) error
}

// StepStore is a Store that also records steps (idempotent.Step): an
// optional capability, discovered with a type assertion as database/sql
// discovers a driver's. With a store that is not a StepStore, Step refuses to
// run before its function does. Claim's rules for Steps (kept by a resumable
// takeover, dropped by every other replacement) and Resumed apply only to
// StepStores; a plain Store never holds steps and never reports Resumed.
type StepStore interface {
	Store

	// AppendStep adds step at the end of the Steps of the INPROGRESS record
	// id, on condition that it carries lease. It returns an error wrapping
	// ErrLeaseLost if the record is gone, completed or has another lease, and
	// one wrapping ErrTooLarge, without writing, if the record with the step
	// would not fit the store.
	AppendStep(ctx context.Context, id, lease string, step Step) error

	// Suspend sets the lease end of the INPROGRESS record id to leaseEnd and
	// marks it Suspended, keeping the record and its Steps, on condition that
	// it carries lease: an owner whose work failed after finishing steps lets
	// the next claim for the same payload take the record over at once and
	// resume. A record
	// that is already gone is not an error; one with another lease yields an
	// error wrapping ErrLeaseLost; one COMPLETED under lease is kept and
	// yields an error wrapping ErrAlreadyCompleted. A Tx's Commit still in
	// flight fails on a suspended record, as after Release.
	Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error
}

// ClaimResult is the answer to Store.Claim.
type ClaimResult struct {
	// Claimed reports whether the caller now owns the record.
	Claimed bool
	// TookOver reports that the claim replaced another owner's INPROGRESS
	// record whose lease had lapsed while it ran: the owner crashed or
	// overran. Replacing an expired COMPLETED record is not a takeover, nor is
	// replacing a suspended one (see Resumed).
	TookOver bool
	// Resumed reports that the claim replaced a suspended record (its owner
	// failed and called Suspend): an ordinary retry after a handler error,
	// never reported as TookOver.
	Resumed bool
	// Existing is the live record that refused the claim; nil when Claimed.
	Existing *Record
	// Steps are the steps the claimed record kept from the record it took
	// over (see Store.Claim); nil otherwise.
	Steps []Step
}
