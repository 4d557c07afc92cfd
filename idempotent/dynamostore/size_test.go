package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// The tests of DynamoDB's item size rule, which the Store's limits and the
// bench harness both measure with.

func TestNumberSize(t *testing.T) {
	t.Parallel()
	ints := []struct {
		n    int64
		want int
	}{
		{0, 1}, {1, 2}, {10, 2}, {12, 2}, {123, 3}, {1000, 2}, {1_700_000_000, 2},
		{1_700_003_600, 5}, {1_700_000_001_500, 7}, {-1, 3}, {-9_223_372_036_854_775_808, 12},
	}
	for _, tt := range ints {
		assert.Equal(t, tt.want, dynamostore.NumberSize(tt.n), "%d", tt.n)
	}
	// Numbers as an N attribute holds them: the attribute's size less its
	// name's.
	strs := []struct {
		n    string
		want int
	}{
		{"0", 1},
		{"1", 2},
		{"12", 2},
		{"123", 3},
		{"1700000000", 2},    // trailing zeros trimmed: "17"
		{"1763798400123", 8}, // 13 significant digits
		{"0.0012", 2},        // point and leading zeros do not count: "12"
		{"-0.0012", 3},       // the sign does, erring large
		{"1.5E+3", 2},        // nor does the exponent
		{"+12", 2},
	}
	for _, tt := range strs {
		item := map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: tt.n}}
		assert.Equal(t, 1+tt.want, dynamostore.ItemSize(item), "%q", tt.n)
	}
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	tests := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"empty", nil, 0},
		{"scalars and containers", map[string]types.AttributeValue{
			"id":         s("abc"),                                                                                       // 2 + 3
			"data":       &types.AttributeValueMemberB{Value: []byte("pxyz")},                                            // 4 + 4
			"expiration": &types.AttributeValueMemberN{Value: "1763798400"},                                              // 10 + 5
			"flag":       &types.AttributeValueMemberBOOL{Value: true},                                                   // 4 + 1
			"m":          &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("v")}},              // 1 + 3 + (1+1+1)
			"l":          &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{}}}, // 1 + 3 + (1+1)
		}, 5 + 8 + 15 + 5 + 7 + 6},
		{"sets", map[string]types.AttributeValue{
			"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}},   // 2 + 3
			"ns": &types.AttributeValueMemberNS{Value: []string{"1", "100"}},  // 2 + 2 + 2
			"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1, 2}, {3}}}, // 2 + 3
		}, 5 + 6 + 5},
		{"multibyte names and strings count their UTF-8 bytes", map[string]types.AttributeValue{"é": s("日本")}, 2 + 6},
		{"nested", map[string]types.AttributeValue{"steps": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"name": s("charge")}},
		}}}, 5 + 3 + 1 + (3 + 1 + 4 + 6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, dynamostore.ItemSize(tt.item))
		})
	}
}
