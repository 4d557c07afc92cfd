package idemkitcli

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
)

// noFlag lists the dynamostore.Options fields the command has no flag for,
// and why. Every other field must have one.
var noFlag = map[string]string{
	"MaxItemBytes":         "bounds the writes of Complete and AppendStep; the command never writes a record",
	"ScanPageSize":         "how list pages its Scan, not where records are: DynamoDB's own pages serve",
	"ClaimManyConcurrency": "bounds a batch's claim wave; the command never claims a record",
}

// storeOnlyFlags are the store flags that are not dynamostore layout flags.
var storeOnlyFlags = []string{"table", "redis", "redis-cluster", "redis-key-prefix", "postgres", "postgres-table"}

// kebab turns a Go field name into its flag name: InProgressExpirationAttr
// -> in-progress-expiration-attr.
func kebab(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestLayoutFlagsMatchOptions keeps the store flags and dynamostore.Options
// from drifting apart: every field has a flag of its name, the flag reaches
// the store's options (mergeLayout), and there is no layout flag without a
// field. A table laid out with a custom attribute name is only read right
// (and forget only knows what it deletes) when the command can be told it.
func TestLayoutFlagsMatchOptions(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var s storeFlags
	s.register(fs)

	typ := reflect.TypeFor[dynamostore.Options]()
	want := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			if why, ok := noFlag[f.Name]; ok {
				assert.Nil(t, fs.Lookup(kebab(f.Name)), "%s has a flag after all: drop it from noFlag", f.Name)
				t.Logf("no flag: %s", why)
				return
			}
			name := kebab(f.Name)
			want[name] = true
			require.Equal(t, reflect.String, f.Type.Kind(), "a new kind of layout option: give it a flag and extend this test")
			fl := fs.Lookup(name)
			require.NotNil(t, fl, "dynamostore.Options.%s has no --%s flag", f.Name, name)
			assert.Contains(t, fl.Usage, "dynamostore Options."+f.Name, "--%s's help names the field", name)
			require.NoError(t, fs.Set(name, "flag-"+name))

			merged := reflect.ValueOf(mergeLayout(dynamostore.Options{}, s.layout))
			assert.Equal(t, "flag-"+name, merged.FieldByName(f.Name).String(), "mergeLayout drops --%s", name)
		})
	}
	fs.VisitAll(func(fl *flag.Flag) {
		for _, other := range storeOnlyFlags {
			if fl.Name == other {
				return
			}
		}
		assert.True(t, want[fl.Name], "--%s matches no dynamostore.Options field", fl.Name)
	})
}

func TestKebab(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"KeyAttr", "key-attr"},
		{"InProgressExpirationAttr", "in-progress-expiration-attr"},
		{"StaticPartitionKey", "static-partition-key"},
		{"StepsAttr", "steps-attr"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, kebab(tt.in))
	}
}
