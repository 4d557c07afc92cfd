package payments_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/functions/payments"
)

func TestParseRequest(t *testing.T) {
	t.Parallel()
	valid := payments.Request{CustomerID: "cus_1", Amount: 2500, Currency: "EUR"}
	tests := []struct {
		name string
		body string
		want payments.Request
		errs []payments.InvalidParam // nil: valid
	}{
		{name: "valid", body: `{"customerId":"cus_1","amount":2500,"currency":"EUR"}`, want: valid},
		{name: "any order and white space", body: " {\n\"currency\": \"EUR\", \"amount\" : 2500, \"customerId\":\"cus_1\"}\n", want: valid},
		{name: "largest amount", body: `{"customerId":"cus_1","amount":99999999,"currency":"EUR"}`,
			want: payments.Request{CustomerID: "cus_1", Amount: payments.MaxAmount, Currency: "EUR"}},
		{name: "unicode customer", body: `{"customerId":"Zoë Ø","amount":1,"currency":"DKK"}`,
			want: payments.Request{CustomerID: "Zoë Ø", Amount: 1, Currency: "DKK"}},

		{name: "amount zero", body: `{"customerId":"cus_1","amount":0,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be greater than 0"}}},
		{name: "amount negative", body: `{"customerId":"cus_1","amount":-5,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be greater than 0"}}},
		{name: "amount negative zero", body: `{"customerId":"cus_1","amount":-0,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be greater than 0"}}},
		{name: "amount too large", body: `{"customerId":"cus_1","amount":100000000,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be at most 99999999"}}},
		{name: "amount beyond int64", body: `{"customerId":"cus_1","amount":123456789012345678901234567890,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be at most 99999999"}}},
		{name: "amount hugely negative", body: `{"customerId":"cus_1","amount":-123456789012345678901234567890,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be greater than 0"}}},
		{name: "amount fraction", body: `{"customerId":"cus_1","amount":12.5,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50, without a fraction or exponent"}}},
		{name: "amount integral fraction", body: `{"customerId":"cus_1","amount":12.0,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50, without a fraction or exponent"}}},
		{name: "amount exponent", body: `{"customerId":"cus_1","amount":1e3,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50, without a fraction or exponent"}}},
		{name: "amount string", body: `{"customerId":"cus_1","amount":"12","currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50, not a string"}}},
		{name: "amount bool", body: `{"customerId":"cus_1","amount":true,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50"}}},
		{name: "amount object", body: `{"customerId":"cus_1","amount":{"value":1},"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50"}}},
		{name: "amount null", body: `{"customerId":"cus_1","amount":null,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "amount", Reason: "is required"}}},

		{name: "currency lower case", body: `{"customerId":"cus_1","amount":1,"currency":"eur"}`,
			errs: []payments.InvalidParam{{Name: "currency", Reason: "must be a three-letter ISO 4217 code in upper case, such as EUR"}}},
		{name: "currency four letters", body: `{"customerId":"cus_1","amount":1,"currency":"EURO"}`,
			errs: []payments.InvalidParam{{Name: "currency", Reason: "must be a three-letter ISO 4217 code in upper case, such as EUR"}}},
		{name: "currency trailing newline", body: `{"customerId":"cus_1","amount":1,"currency":"EUR\n"}`,
			errs: []payments.InvalidParam{{Name: "currency", Reason: "must be a three-letter ISO 4217 code in upper case, such as EUR"}}},
		{name: "currency number", body: `{"customerId":"cus_1","amount":1,"currency":978}`,
			errs: []payments.InvalidParam{{Name: "currency", Reason: "must be a string"}}},

		{name: "customer empty", body: `{"customerId":"","amount":1,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "customerId", Reason: "must not be empty"}}},
		{name: "customer too long", body: `{"customerId":"` + strings.Repeat("c", payments.MaxCustomerIDLength+1) + `","amount":1,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "customerId", Reason: "must be at most 128 bytes long"}}},
		{name: "customer control character", body: `{"customerId":"cus\u0000_1","amount":1,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "customerId", Reason: "must not contain control characters"}}},
		{name: "customer padded", body: `{"customerId":" cus_1","amount":1,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "customerId", Reason: "must not begin or end with white space"}}},
		{name: "customer number", body: `{"customerId":42,"amount":1,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Name: "customerId", Reason: "must be a string"}}},

		{name: "unknown field", body: `{"customerId":"cus_1","amount":1,"currency":"EUR","ammount":2}`,
			errs: []payments.InvalidParam{{Name: "ammount", Reason: "is not a known field (expected customerId, amount and currency)"}}},
		{name: "everything missing", body: `{}`,
			errs: []payments.InvalidParam{{Name: "customerId", Reason: "is required"}, {Name: "amount", Reason: "is required"}, {Name: "currency", Reason: "is required"}}},
		{name: "several faults", body: `{"customerId":"","amount":"1","currency":"eur"}`,
			errs: []payments.InvalidParam{
				{Name: "customerId", Reason: "must not be empty"},
				{Name: "amount", Reason: "must be an integer number of minor units, such as 1250 for 12.50, not a string"},
				{Name: "currency", Reason: "must be a three-letter ISO 4217 code in upper case, such as EUR"},
			}},
		{name: "duplicate field", body: `{"customerId":"cus_1","amount":1,"amount":1000,"currency":"EUR"}`,
			errs: []payments.InvalidParam{{Reason: `the request body holds the field "amount" more than once`}}},
		{name: "empty body", body: ``, errs: []payments.InvalidParam{{Reason: "the request body is empty; send a JSON object"}}},
		{name: "array", body: `[1]`, errs: []payments.InvalidParam{{Reason: "the request body must be a JSON object"}}},
		{name: "string", body: `"hi"`, errs: []payments.InvalidParam{{Reason: "the request body must be a JSON object"}}},
		{name: "truncated", body: `{"customerId":"cus_1","amount":25`, errs: []payments.InvalidParam{{Reason: "the request body is not valid JSON"}}},
		{name: "trailing object", body: `{"customerId":"cus_1","amount":1,"currency":"EUR"}{}`,
			errs: []payments.InvalidParam{{Reason: "the request body holds data after the JSON object"}}},
		{name: "trailing garbage", body: `{"customerId":"cus_1","amount":1,"currency":"EUR"} x`,
			errs: []payments.InvalidParam{{Reason: "the request body holds data after the JSON object"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := payments.ParseRequest([]byte(tt.body))
			if tt.errs == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			var verr *payments.ValidationError
			require.True(t, errors.As(err, &verr), "error %v", err)
			assert.Equal(t, tt.errs, verr.Params)
			assert.Equal(t, payments.Request{}, got)
		})
	}
}

func TestParseRequestBoundsEchoes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"customerId":"cus_1","amount":1,"currency":"EUR"`)
	for i := range 50 {
		b.WriteString(`,"` + strings.Repeat("x", 100) + string(rune('a'+i%26)) + strings.Repeat("y", i) + `":1`)
	}
	b.WriteString("}")
	_, err := payments.ParseRequest([]byte(b.String()))
	var verr *payments.ValidationError
	require.True(t, errors.As(err, &verr))
	assert.Len(t, verr.Params, 10, "at most ten faults are listed")
	for _, p := range verr.Params {
		assert.LessOrEqual(t, len(p.Name), 64+len("…"), "long names are shortened")
	}
	assert.Contains(t, verr.Error(), "payments: invalid request: ")
}
