package e2e

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Personalize is a run-unique suffix that makes sample events the run's
// own: appended to idempotency keys, customer IDs, order IDs and SKUs, so
// that a run meets neither the records nor the ledger items nor the stock
// counts of any other run on the same tables.
type Personalize string

// NewPersonalize returns a fresh random suffix.
func NewPersonalize() Personalize {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return Personalize(hex.EncodeToString(b[:]))
}

// Key returns the run's version of an idempotency key.
func (p Personalize) Key(key string) string { return key + "-" + string(p) }

// Customer returns the run's version of a customer ID.
func (p Personalize) Customer(id string) string { return id + "_" + string(p) }

// Order returns the run's version of an order ID.
func (p Personalize) Order(id string) string { return id + "-" + string(p) }

// SKU returns the run's version of a SKU.
func (p Personalize) SKU(sku string) string { return sku + "-" + string(p) }

var (
	customerField = regexp.MustCompile(`("customerId"\s*:\s*")([^"\\]*)(")`)
	orderField    = regexp.MustCompile(`("orderId"\s*:\s*")([^"\\]*)(")`)
	skuField      = regexp.MustCompile(`("sku"\s*:\s*")([^"\\]*)(")`)
)

// replaceString rewrites the string value of a field in JSON text, even in
// a body that is not valid JSON as a whole (the malformed samples).
func replaceString(re *regexp.Regexp, body string, f func(string) string) string {
	return re.ReplaceAllStringFunc(body, func(m string) string {
		g := re.FindStringSubmatch(m)
		return g[1] + f(g[2]) + g[3]
	})
}

// Payment returns a copy of a payments event with its Idempotency-Key and
// its body's customerId made the run's own, and content-length updated.
func (p Personalize) Payment(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	ev.Headers = cloneMap(ev.Headers)
	for k, v := range ev.Headers {
		if strings.EqualFold(k, "idempotency-key") {
			ev.Headers[k] = p.Key(v)
		}
	}
	ev.Body = replaceString(customerField, ev.Body, p.Customer)
	if _, ok := ev.Headers["content-length"]; ok {
		ev.Headers["content-length"] = strconv.Itoa(len(ev.Body))
	}
	return ev
}

// WithKey returns a copy of a payments event with another Idempotency-Key.
func WithKey(ev events.APIGatewayV2HTTPRequest, key string) events.APIGatewayV2HTTPRequest {
	ev.Headers = cloneMap(ev.Headers)
	for k := range ev.Headers {
		if strings.EqualFold(k, "idempotency-key") {
			delete(ev.Headers, k)
		}
	}
	ev.Headers["idempotency-key"] = key
	return ev
}

// Orders returns a copy of an SQS event with every body's orderId and sku
// made the run's own and md5OfBody updated. Message IDs are kept.
func (p Personalize) Orders(ev events.SQSEvent) events.SQSEvent {
	records := make([]events.SQSMessage, len(ev.Records))
	for i, m := range ev.Records {
		m.Body = replaceString(orderField, m.Body, p.Order)
		m.Body = replaceString(skuField, m.Body, p.SKU)
		sum := md5.Sum([]byte(m.Body))
		m.Md5OfBody = hex.EncodeToString(sum[:])
		records[i] = m
	}
	return events.SQSEvent{Records: records}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
