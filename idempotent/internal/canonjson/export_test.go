package canonjson

// AppendQuotedBytes is AppendQuoted for a byte slice, as the canonical form
// writes its strings.
var AppendQuotedBytes = appendQuoted[[]byte]
