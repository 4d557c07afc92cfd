package receipts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/ddbstreams"
	"github.com/idemkit/idemkit/idempotent/storage"
)

const (
	// Prefix is the idempotency key prefix of the receipts function: fixed,
	// so that renaming or redeploying the function keeps its records valid.
	Prefix = "receipts"
	// Expiry is how long a payment's receipt is remembered: two days, longer
	// than DynamoDB Streams keeps a record (24 hours). A record is processed
	// after it was written, so every delivery of it the stream can still
	// make, a rewound or recreated event source mapping's included, finds
	// the payment's entry and is replayed.
	Expiry = 48 * time.Hour
	// Parallelism is how many payments of a batch are processed at once; the
	// records of one payment still run in stream order.
	Parallelism = 4
	// StepSend is the name of the step that sends a receipt.
	StepSend = "send-receipt"
)

// ErrNoImage: an INSERT record carries no new image, so there is nothing to
// send. The payments table's stream must have the view type NEW_IMAGE or
// NEW_AND_OLD_IMAGES (the stack's has the latter). The record is reported
// and blocks its shard until the event source mapping's retries run out.
var ErrNoImage = errors.New("receipts: the stream record has no new image (the stream view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES)")

// Payment is an item of the payments ledger (payments.LedgerItem) as the
// stream delivers it: ddbstreams decodes the images into it with
// attributevalue.UnmarshalMap, and checks a new image with Validate.
type Payment payments.LedgerItem

// Validate reports why a ledger item cannot get a receipt. ddbstreams calls
// it on each new image and reports a record that fails it without running
// the handler. The payments function writes only valid items; this guards
// against items written by other hands.
func (p Payment) Validate() error {
	var errs []error
	if p.PaymentID == "" {
		errs = append(errs, errors.New("paymentId is required"))
	}
	if p.CustomerID == "" {
		errs = append(errs, errors.New("customerId is required"))
	}
	if p.Amount < 1 {
		errs = append(errs, errors.New("amount must be at least 1"))
	}
	if len(p.Currency) != 3 {
		errs = append(errs, errors.New("currency must be a three-letter code"))
	}
	return errors.Join(errs...)
}

// Key returns a change's idempotency key: the payment ID, so that the
// function sends one receipt per payment whatever changes of the item the
// stream carries, and however often it delivers each.
func Key(c ddbstreams.Change[Payment]) (string, error) { return c.Key.PaymentID, nil }

// New returns the receipts Lambda handler: a DynamoDB Streams consumer of
// the payments table that sends one receipt per payment through mailer,
// idempotent per payment with ddbstreams.Wrap over store (keyed by Key), and
// answers with a partial batch response, Parallelism payments at a time.
// opts configure the engine (idempotent.New) after the function's own
// settings (prefix Prefix, expiry Expiry), so they can override them and
// add, for example, idempotent.WithOutcomeHook(...). store must record steps
// (storage.StepStore: the memory and DynamoDB stores do), or every receipt
// fails with idempotent.ErrInvalidStep. New panics if mailer is nil.
func New(store storage.Store, mailer Mailer, opts ...idempotent.Option) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if mailer == nil {
		panic("receipts: New: nil mailer")
	}
	e := idempotent.New(store, append([]idempotent.Option{idempotent.WithPrefix(Prefix), idempotent.WithExpiry(Expiry)}, opts...)...)
	s := &sender{mailer: mailer}
	return ddbstreams.Wrap(e, s.handle,
		ddbstreams.WithKey(Key),
		ddbstreams.WithParallelism(Parallelism))
}

// sender is the function's logic, before idempotency.
type sender struct {
	mailer Mailer
}

// handle sends the receipt of an inserted payment. Later changes of the item
// (a refund) send nothing; under a key on the payment they are duplicates
// anyway, replayed without running this.
//
// The send is a step: once it has succeeded, the handler's record holds its
// message ID, and a run after a takeover (a crash between the send and the
// completion) answers the step from the record instead of calling the
// mailer. Inside the step, idempotent.DownstreamKey is the step's own key,
// the same for every run of the payment: a crash inside the send, after the
// mail went out and before the step was recorded, makes the next run call
// the mailer with the same key, and a mailer that honours keys sends
// nothing more. A failed send is an error: the payment's entry is given
// back, the record is reported, and the stream delivers it again.
func (s *sender) handle(ctx context.Context, c ddbstreams.Change[Payment]) error {
	if c.EventName != ddbstreams.Insert {
		return nil
	}
	if c.NewImage == nil {
		return ErrNoImage
	}
	p := *c.NewImage
	r := Receipt{PaymentID: p.PaymentID, CustomerID: p.CustomerID, Amount: p.Amount, Currency: p.Currency, CapturedAt: p.CreatedAt}
	msgID, err := idempotent.Step(ctx, StepSend, func(ctx context.Context) (string, error) {
		return s.mailer.Send(ctx, idempotent.DownstreamKey(ctx), r)
	})
	switch {
	case errors.Is(err, idempotent.ErrStepNotRecorded):
		// The receipt went out; only its step record is missing. Going on
		// completes the payment's entry, which is all a later delivery needs.
		slog.WarnContext(ctx, "receipts: receipt sent, its step not recorded",
			slog.String("payment_id", p.PaymentID), slog.String("error", err.Error()))
	case err != nil:
		return fmt.Errorf("receipts: send the receipt of %s: %w", p.PaymentID, err)
	}
	inv, _ := idempotent.FromContext(ctx)
	slog.InfoContext(ctx, "receipts: receipt done",
		slog.String("payment_id", p.PaymentID),
		slog.String("message_id", msgID),
		slog.Bool("took_over", inv.TookOver))
	return nil
}
