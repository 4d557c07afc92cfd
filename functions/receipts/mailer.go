package receipts

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Receipt is what the function sends for one payment.
type Receipt struct {
	// PaymentID names the payment.
	PaymentID string `json:"paymentId"`
	// CustomerID is the customer the receipt goes to; a real mailer looks up
	// their address.
	CustomerID string `json:"customerId"`
	// Amount is in minor units of Currency.
	Amount int64 `json:"amount"`
	// Currency is the ISO 4217 code.
	Currency string `json:"currency"`
	// CapturedAt is the payment's createdAt, RFC 3339.
	CapturedAt string `json:"capturedAt"`
}

// Mailer sends receipts. key is the send's idempotency key: the same for
// every attempt to send one payment's receipt (it is the downstream key of
// the function's send step), so a mailer that honours it, as e-mail APIs
// with an Idempotency-Key header do, sends once per key however often it is
// called. Send returns the message's ID.
type Mailer interface {
	Send(ctx context.Context, key string, r Receipt) (messageID string, err error)
}

// MailerFunc adapts a function to a Mailer, as http.HandlerFunc does; tests
// and the demo wrap a LocalMailer with one to inject faults.
type MailerFunc func(ctx context.Context, key string, r Receipt) (string, error)

// Send calls f.
func (f MailerFunc) Send(ctx context.Context, key string, r Receipt) (string, error) {
	return f(ctx, key, r)
}

// LocalMailer is a mailer in process memory that honours keys and counts:
// the first Send of a key "sends" the receipt (counts it, logs it when a
// logger is set) and returns a new message ID; a later Send of the same key
// sends nothing and returns that ID again. It stands in for an e-mail API in
// the tests, the demo and the deployed sample, where it remembers the keys
// of one execution environment only (a real API keeps them for days). It
// keeps every key and receipt it saw, so it is not meant for long-lived
// processes with heavy traffic. The zero value is ready to use; a
// LocalMailer is safe for concurrent use.
type LocalMailer struct {
	// Logger, when set, gets one line per receipt sent ("receipts: receipt
	// sent", with the payment and message IDs, never the customer).
	Logger *slog.Logger

	mu      sync.Mutex
	byKey   map[string]string // key → message ID
	sent    map[string]int    // payment ID → receipts sent
	order   []Receipt         // receipts sent, in order
	deduped int               // sends answered from their key
}

var _ Mailer = (*LocalMailer)(nil)

// Send sends r once per key (see LocalMailer). An empty key, which a run
// without idempotency passes (IDEMKIT_DISABLED), sends every time.
func (m *LocalMailer) Send(ctx context.Context, key string, r Receipt) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("receipts: send: %w", err)
	}
	m.mu.Lock()
	if id, ok := m.byKey[key]; ok && key != "" {
		m.deduped++
		m.mu.Unlock()
		return id, nil
	}
	if m.byKey == nil {
		m.byKey, m.sent = map[string]string{}, map[string]int{}
	}
	m.order = append(m.order, r)
	id := fmt.Sprintf("msg_%06d", len(m.order))
	if key != "" {
		m.byKey[key] = id
	}
	m.sent[r.PaymentID]++
	m.mu.Unlock()
	if m.Logger != nil {
		m.Logger.InfoContext(ctx, "receipts: receipt sent",
			slog.String("payment_id", r.PaymentID), slog.String("message_id", id))
	}
	return id, nil
}

// Sent returns how many receipts were sent for a payment.
func (m *LocalMailer) Sent(paymentID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[paymentID]
}

// Receipts returns the receipts sent, in the order they were sent.
func (m *LocalMailer) Receipts() []Receipt {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Receipt(nil), m.order...)
}

// Deduplicated returns how many sends were answered from their key without
// sending.
func (m *LocalMailer) Deduplicated() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deduped
}
