package canonjson_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idempotent/internal/benchbody"
	"github.com/idemkit/idemkit/idempotent/internal/canonjson"
)

// benchInputs are the documents BenchmarkCanonicalize runs: payment-1k is the
// 1 KB JSON POST of the middleware's benchmark (idempotent/nethttp), built
// the same way.
var benchInputs = []struct {
	name string
	data []byte
}{
	{"small", []byte(`{"amount":2500,"currency":"EUR","customerId":"cus_NffrFeUfNV2Hib"}`)},
	{"payment-1k", benchbody.Payment1K()},
	{"escapes", []byte(strings.Repeat(`{"k\u00e9y":"caf\u00e9 <b>&amp;</b> \ud83d\ude00 \n\t\"q\"","z":1,"a":[-0.5e+10,true,null]},`, 8)[:0] +
		"[" + strings.TrimSuffix(strings.Repeat(`{"k\u00e9y":"caf\u00e9 <b>&amp;</b> \ud83d\ude00 \n\t\"q\"","z":1,"a":[-0.5e+10,true,null]},`, 8), ",") + "]")},
	{"pretty-64k", func() []byte {
		var sb strings.Builder
		sb.WriteString("[\n")
		for i := 0; sb.Len() < 64<<10; i++ {
			if i > 0 {
				sb.WriteString(",\n")
			}
			sb.WriteString(`  {"zeta": ` + strconv.Itoa(i) + `, "id": "item-` + strconv.Itoa(i) + `", "tags": ["a", "b"], "nested": {"y": 1.5, "x": null}}`)
		}
		sb.WriteString("\n]\n")
		return []byte(sb.String())
	}()},
}

// BenchmarkCanonicalize measures Canonicalize on documents of a few shapes.
func BenchmarkCanonicalize(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := canonjson.Canonicalize(in.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
