package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// paymentEvent is testdata/payment-event.json, the ~1 KB event both the Go
// driver and the Powertools script send. Its idempotencyKey is the key (in
// Powertools: eventKeyJmesPath "idempotencyKey").
type paymentEvent struct {
	IdempotencyKey string `json:"idempotencyKey"`
	CustomerID     string `json:"customerId"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Description    string `json:"description"`
	PaymentMethod  struct {
		Type        string `json:"type"`
		Brand       string `json:"brand"`
		Last4       string `json:"last4"`
		ExpMonth    int    `json:"expMonth"`
		ExpYear     int    `json:"expYear"`
		Fingerprint string `json:"fingerprint"`
	} `json:"paymentMethod"`
	BillingAddress map[string]string `json:"billingAddress"`
	Items          []struct {
		SKU        string `json:"sku"`
		Name       string `json:"name"`
		Quantity   int    `json:"quantity"`
		UnitAmount int64  `json:"unitAmount"`
	} `json:"items"`
	Metadata    map[string]string `json:"metadata"`
	RequestedAt string            `json:"requestedAt"`
}

// paymentResult is what the benchmark handler returns (and the store keeps).
type paymentResult struct {
	PaymentID string `json:"paymentId"`
	Status    string `json:"status"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Receipt   string `json:"receipt,omitempty"` // §8's larger response only
}

// chargeHandler is the handler under the wrapper in every in-process and
// driver benchmark: no side effect, a small response, as in the Node script.
func chargeHandler(_ context.Context, e paymentEvent) (paymentResult, error) {
	return paymentResult{PaymentID: "pay_" + e.IdempotencyKey, Status: "captured", Amount: e.Amount, Currency: e.Currency}, nil
}

// paddedCharge is chargeHandler with a receipt of pad characters in every
// response (none when pad is 0), as bench.mjs --pad: §8's larger response.
func paddedCharge(pad int) func(context.Context, paymentEvent) (paymentResult, error) {
	if pad <= 0 {
		return chargeHandler
	}
	receipt := strings.Repeat("x", pad)
	return func(ctx context.Context, e paymentEvent) (paymentResult, error) {
		r, err := chargeHandler(ctx, e)
		r.Receipt = receipt
		return r, err
	}
}

func eventKey(e paymentEvent) (string, error) { return e.IdempotencyKey, nil }

func loadPaymentEvent(benchDir string) (paymentEvent, error) {
	var e paymentEvent
	b, err := os.ReadFile(filepath.Join(benchDir, "testdata", "payment-event.json"))
	if err != nil {
		return e, err
	}
	return e, json.Unmarshal(b, &e)
}
