package benchbody

import "strconv"

// Payment1K returns a new copy of a JSON payment request of about 1 KB: a
// few nested objects and an array of line items, keys in no sorted order.
func Payment1K() []byte {
	b := []byte(`{"customerId":"cus_NffrFeUfNV2Hib","amount":2500,"currency":"EUR",` +
		`"description":"Order 1001: 2 x red mug, 1 x blue cap, express shipping",` +
		`"paymentMethod":{"type":"card","brand":"visa","last4":"4242","expMonth":12,"expYear":2030},` +
		`"billingAddress":{"name":"Alice Example","line1":"1 Example Street","city":"Berlin","postalCode":"10115","country":"DE"},` +
		`"items":[`)
	for i := 0; len(b) < 1000; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"sku":"SKU-`+strconv.Itoa(i)+`","name":"Item","quantity":1,"unitAmount":800}`...)
	}
	return append(b, `],"requestedAt":"2026-05-01T12:00:00Z"}`...)
}
