package sqsbatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/sqsbatch"
	"github.com/idemkit/idemkit/internal/testlog"
)

// FuzzWrapBody feeds arbitrary bodies through Wrap. The function never
// returns an error or panics; a message is reported exactly when the handler
// was not called, and it is called exactly when the body is a valid order;
// and a marker placed in a body never reaches the logs.
func FuzzWrapBody(f *testing.F) {
	const marker = "Zq9Xk"
	for _, seed := range []string{
		`{"orderId":"a","amount":1}`,
		`{"orderId":"a","amount":1,"extra":[1,2,{"x":null}]}`,
		`{"orderId":"Zq9Xk","amount":0}`,
		`{"orderId":"a","amount":"Zq9Xk"}`,
		`{"orderId":"a","amount":9999999999999999999999Zq9Xk}`,
		`{"orderId":"a","amount":99999999999999999999}`,
		`{"orderId":["Zq9Xk"]}`,
		`{"Zq9Xk":`,
		`{"orderId":"a","amount":1}{"Zq9Xk":1}`,
		` null `,
		``,
		"Zq9Xk",
		"{\"orderId\":\"\xff\",\"amount\":1}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var logs testlog.Buffer
		logger := testlog.Logger(&logs)
		called := false
		h := sqsbatch.Wrap(newEngine(idempotent.NewMemoryStore(), idempotent.WithLogger(logger)), func(_ context.Context, _ order) error {
			called = true
			return nil
		}, sqsbatch.WithKey(byOrderID))

		resp, err := h(context.Background(), batch(msg("m", body)))
		if err != nil {
			t.Fatalf("error %v", err)
		}
		reported := len(resp.BatchItemFailures) == 1
		if reported == called {
			t.Fatalf("reported=%v but handler called=%v", reported, called)
		}
		var o order
		valid := strings.TrimSpace(body) != "null" && json.Unmarshal([]byte(body), &o) == nil &&
			o.Validate() == nil && o.OrderID != "" && len(o.OrderID) <= 1024 && utf8.ValidString(o.OrderID)
		if called != valid {
			t.Fatalf("handler called=%v for a body whose validity is %v", called, valid)
		}
		if strings.Contains(body, marker) && strings.Contains(logs.String(), marker) {
			t.Fatalf("body content logged: %s", logs.String())
		}
	})
}
