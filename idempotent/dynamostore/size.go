package dynamostore

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's item size rule (Developer Guide, "Item sizes and formats"),
// which its 400 KB item limit, its 4 MB transaction limit and its capacity
// units are measured by. It is stated here once: the Store's limits
// (completedSize, minStepItemSize, the transaction's checkBytes) and the
// bench harness (through ItemSize) measure with it.

// Bytes a map or list value costs beyond its contents, and each of its
// elements beyond its own size.
const (
	containerBytes = 3
	elementBytes   = 1
)

// ItemSize is the size in bytes of item by DynamoDB's rule: each
// attribute's name (its UTF-8 length) plus its value's size. A string or
// binary value counts its length; a number one byte per two significant
// digits (leading and trailing zeros, point and exponent do not count)
// plus one, and one more for a negative number's sign, erring large where
// DynamoDB's documented figure is approximate; a boolean or null one byte;
// a set the sum of its elements; a map or list 3 bytes plus, for each
// element, its size (and a map's key) plus one.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is one attribute value's share of ItemSize.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := containerBytes
		for _, e := range v.Value {
			n += elementBytes + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return containerBytes + len(v.Value)*elementBytes + ItemSize(v.Value)
	default:
		return 0
	}
}

// numberSize is the size of a number written as DynamoDB receives it, in
// decimal (an N attribute's string, or strconv's digits of an integer),
// by ItemSize's rule.
func numberSize[T ~string | ~[]byte](s T) int {
	size := 1
	if len(s) > 0 && s[0] == '-' {
		size++
	}
	n, sig := 0, 0 // digits from the first nonzero one; of them, up to the last nonzero one
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c < '0' || c > '9' || c == '0' && n == 0 {
			continue
		}
		n++
		if c != '0' {
			sig = n
		}
	}
	return size + (sig+1)/2
}

// intSize is numberSize of an integer, without allocating.
func intSize(v int64) int {
	var digits [20]byte
	return numberSize(strconv.AppendInt(digits[:0], v, 10))
}
