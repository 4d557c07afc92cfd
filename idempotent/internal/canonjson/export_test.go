package canonjson

// AppendQuotedBytes is AppendQuoted for a byte slice, as the canonical form
// writes its strings.
var AppendQuotedBytes = appendQuoted[[]byte]

// AppendRecursive is the parser Append replaced (recursive_test.go), whose
// errors the tests require of Append, message for message.
var AppendRecursive = appendRecursive
