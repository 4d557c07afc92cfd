package payments

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Processor is the card processor the function charges through: a call to
// another system, which no transaction of ours can include. It must honour
// idempotency keys as card processors do (Stripe's Idempotency-Key): a
// charge with a key it has already seen, with the same parameters, returns
// that charge again without charging; with other parameters it fails with
// an error wrapping ErrProcessorKeyReused.
type Processor interface {
	Charge(ctx context.Context, key string, req ChargeRequest) (Charge, error)
}

// ChargeRequest is what the function asks the processor to charge.
type ChargeRequest struct {
	// CustomerID, Amount (minor units) and Currency are the request's.
	CustomerID string
	Amount     int64
	Currency   string
}

// Charge is the processor's answer: the step's result, recorded in the
// idempotency record so that a resumed run gets it back without charging.
type Charge struct {
	// ID is the processor's charge ID: "ch_" and 26 base32 characters.
	ID string `json:"id"`
	// Key is the idempotency key the charge was made with.
	Key string `json:"key"`
	// Created is when the processor captured the charge, in UTC.
	Created time.Time `json:"created"`
}

// ErrProcessorKeyReused: the processor already charged under this key with
// other parameters, and charged nothing now. The function answers 422
// (ProblemKeyReused).
var ErrProcessorKeyReused = errors.New("payments: the processor holds another charge under this idempotency key")

// LocalProcessor is an in-process Processor that honours idempotency keys
// and counts what it charged: the demo's and the tests' card processor, and
// the deployed sample's stand-in (each Lambda instance has its own; replace
// it with your processor's client). Keys are kept for its lifetime. The zero
// value is ready to use; it is safe for concurrent use.
type LocalProcessor struct {
	// Now, when set, is the clock of Charge.Created; time.Now when nil.
	Now func() time.Time

	mu      sync.Mutex
	charges map[string]localCharge // by key
	calls   int
}

type localCharge struct {
	req    ChargeRequest
	charge Charge
}

var _ Processor = (*LocalProcessor)(nil)

// Charge implements Processor.
func (p *LocalProcessor) Charge(ctx context.Context, key string, req ChargeRequest) (Charge, error) {
	if err := ctx.Err(); err != nil {
		return Charge{}, fmt.Errorf("payments: charge: %w", err)
	}
	if key == "" {
		return Charge{}, errors.New("payments: charge: an idempotency key is required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if c, ok := p.charges[key]; ok {
		if c.req != req {
			return Charge{}, ErrProcessorKeyReused
		}
		return c.charge, nil
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	c := Charge{ID: "ch_" + strings.ToLower(idEncoding.EncodeToString(b[:])), Key: key, Created: now().UTC().Truncate(time.Millisecond)}
	if p.charges == nil {
		p.charges = make(map[string]localCharge)
	}
	p.charges[key] = localCharge{req: req, charge: c}
	return c, nil
}

// Charges returns how many charges the processor made: distinct keys, not
// calls (a call with a known key charges nothing).
func (p *LocalProcessor) Charges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.charges)
}

// Calls returns how many times Charge was called.
func (p *LocalProcessor) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}
