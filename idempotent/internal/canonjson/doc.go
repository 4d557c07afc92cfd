// Package canonjson turns JSON text into a canonical form, so that two documents
// that mean the same thing (key order, white space, escapes) hash the same, and
// two that differ (including numbers beyond 2^53) never do. AppendQuoted writes
// a string as json.Marshal does, as the canonical form writes its strings.
package canonjson
